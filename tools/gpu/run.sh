#!/usr/bin/env bash
# The CUDA backend on the GPU machine in one device call (docs/cuda-backend.md): configures the
# engine-only build with CUDA (sm_90), builds, runs the op tests (cuda_tests, full V4.1 shapes
# included), the per-role layer benchmark and the decode GEMV benchmark (appended to the layer
# table), flash-tiny on the GPU against the CPU, and the golden tests on the cuda backend, each
# stage under the time left; writes under $OUT (at most 8 files):
#   env.txt  build.log  cuda_tests.log  bench_layers.md  bench_model.md  cli.log  golden.log
#   summary.md (the figures, last: also printed at the end).
# Run from the root of a source tree (the device tool's carried copy): `bash tools/gpu/run.sh`.
# The GPU machine has no Qt, no SQLite and possibly none of the build's other Debian packages:
# a deps/ folder beside this tree's root (tools/gpu/pack_deps.sh writes it here) is searched first.
# Environment: OUT (required), BUDGET_S (seconds for the whole script, default 440), JOBS, GOLDEN=0
# to skip the golden tests (when the checkout's tests/data is not this tree's), QUICK=1 for the
# tests, a batch-1 layer table and the one-row GEMV bench only (a short device call: no model bench
# or CLI round, and no profile unless PROFILE=1). PROFILE_PREFILL=0 keeps the profile to decode,
# CLI=0 skips the CLI round, GEMV=0 the GEMV bench, LAYER_BENCH_ARGS replaces the layer bench's
# arguments, DETAIL="kernel names" adds tools/gpu/ncu_detail.sh's stall report (its BENCH_ARGS and
# SKIP pass through: a prefill's kernels, for one). AB="NAME=a,b ..." runs the layer bench
# (AB_BENCH_ARGS, default a batch-1 decode of every role) under each value of each switch, AB_ROUNDS
# times (default 2) with the values taking turns, and appends its tables to the layer table;
# GEMV_AB="NAME=a,b ..." does the same with the decode GEMV and MoE-step bench (cuda_gemv_bench: the
# kernels alone), in QUICK calls too; the indexer's selection bench (cuda_select_bench, on random
# rows and on the layer bench's own score rows, --rows) and its prompt bench
# (cuda_prompt_indexer_bench) are appended there in every call.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
START=$(date +%s)
BUDGET_S=${BUDGET_S:-440}
OUT=${OUT:?set OUT to the output directory}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
left() { echo $(( START + BUDGET_S - $(date +%s) )); }
stage() { echo "== $1 ($(( $(date +%s) - START )) s in, $(left) s left)"; }
# A command under the time left minus a reserve for the stages after it.
run_for() { local reserve=$1; shift; local t=$(( $(left) - reserve )); (( t < 5 )) && t=5; timeout "$t" "$@"; }

# Trees carried without assets or test data read them from the checkout beside them.
for d in assets tests/data; do
  [ -e "$d" ] || { [ -e "../$d" ] && ln -s "$(readlink -f "../$d")" "$d"; }
done

stage env | tee "$OUT/env.txt"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv || true
  command -v nvcc && nvcc --version | tail -2; cmake --version | head -1; g++ --version | head -1
  ninja --version; nproc; } >> "$OUT/env.txt" 2>&1

DEPS_ARGS=()
if [ -d deps ]; then
  DEPS_ARGS=(-DCMAKE_PREFIX_PATH="$PWD/deps" -DCMAKE_INCLUDE_PATH="$PWD/deps/include"
             -DCMAKE_LIBRARY_PATH="$PWD/deps/lib")
  export LD_LIBRARY_PATH="$PWD/deps/lib:${LD_LIBRARY_PATH:-}"
fi
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"

stage build | tee "$OUT/build.log"
BUILD=build/engine-only
run_for 100 cmake --preset engine-only -DFLASHDESK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DFLASHDESK_WERROR=OFF "${DEPS_ARGS[@]}" >> "$OUT/build.log" 2>&1
# Reserves (the seconds kept for the stages after one) are smaller in a QUICK call.
if [ "${QUICK:-0}" = 1 ]; then R_BUILD=50 R_TESTS=40; else R_BUILD=180 R_TESTS=200; fi
run_for "$R_BUILD" cmake --build "$BUILD" -j "$JOBS" --target cuda_tests flashdesk-cli cuda_layer_bench \
  cuda_model_bench cuda_gemv_bench cuda_select_bench cuda_prompt_indexer_bench cuda_draw_bench \
  >> "$OUT/build.log" 2>&1
echo "core build exit $?" >> "$OUT/build.log"
# The golden tests live in engine_tests: built while the op tests run.
TESTS_BUILD=
if [ "${GOLDEN:-1}" = 1 ]; then
  ( run_for 60 cmake --build "$BUILD" -j "$JOBS" --target engine_tests > "$OUT/golden.log" 2>&1 ) &
  TESTS_BUILD=$!
else
  echo "golden tests skipped (GOLDEN=0)" > "$OUT/golden.log"
fi

stage cuda_tests | tee -a "$OUT/build.log"
run_for "$R_TESTS" "$BUILD/tests/cuda_tests" > "$OUT/cuda_tests.log" 2>&1
echo "cuda_tests exit $?" >> "$OUT/cuda_tests.log"

stage bench_layers
if [ "${QUICK:-0}" = 1 ]; then LAYER_ARGS=(--iters 5 --batches 1 --prefill 2048); else LAYER_ARGS=(--iters 10); fi
# Quoted words kept (eval, as ncu_detail.sh's BENCH_ARGS): --batches '' names no batch.
[ -n "${LAYER_BENCH_ARGS:-}" ] && eval "LAYER_ARGS=($LAYER_BENCH_ARGS)"
run_for 100 "$BUILD/bench/cuda_layer_bench" "${LAYER_ARGS[@]}" > "$OUT/bench_layers.md" 2>&1
echo "exit $?" >> "$OUT/bench_layers.md"

# A decode step's indexer selection in its two forms of torch's steps (a few seconds).
stage bench_select
{ echo; echo "## The indexer's selection (bench/cuda_select_bench)"; echo
  run_for 90 "$BUILD/bench/cuda_select_bench"; echo "exit $?"; } >> "$OUT/bench_layers.md" 2>&1
# The same selection on the full-shape layers' own score rows (their ties leave equals out, so
# torch's partitions run), each form of the partitions side by side (about 20 s).
stage bench_select_rows
{ echo; echo "## The indexer's selection on the layers' score rows (cuda_select_bench --rows)"; echo
  ROWS=$(mktemp -d)
  run_for 90 "$BUILD/bench/cuda_layer_bench" --iters 3 --batches 1 --prefill 0 --graph 0 \
    --queued 0 --probe-reps 3 --dump-scores "$ROWS" > /dev/null
  LIST=$(cd "$ROWS" && shopt -s nullglob && for f in layer*_input*.f32; do
    case $f in layer20_*) echo "$ROWS/$f:c" ;; *) echo "$ROWS/$f" ;; esac; done | paste -sd,)
  [ -n "$LIST" ] && run_for 80 "$BUILD/bench/cuda_select_bench" --reps 10 --rows "$LIST"
  echo "exit $?"; rm -rf "$ROWS"; } >> "$OUT/bench_layers.md" 2>&1

# A prompt's indexer: its keys decoded once or a tile at a time, its selection's block sizes (a few
# seconds).
stage bench_prompt_indexer
{ echo; echo "## A prompt's indexer (bench/cuda_prompt_indexer_bench)"; echo
  run_for 60 "$BUILD/bench/cuda_prompt_indexer_bench"; echo "exit $?"; } >> "$OUT/bench_layers.md" 2>&1

# A synthetic checkpoint's linears drawn on the GPU against host generation and upload (a few
# seconds; issue 23's load of the whole model).
stage bench_draw
{ echo; echo "## Synthetic linears drawn on the GPU (bench/cuda_draw_bench)"; echo
  run_for 80 "$BUILD/bench/cuda_draw_bench" --experts 8; echo "exit $?"; } >> "$OUT/bench_layers.md" 2>&1

# Switches measured against each other in this call, the values taking turns:
#   ab_tables "NAME=a,b ..." title keep-pattern command args...
# runs the command AB_ROUNDS times (default 2) under each value of each switch, keeping the lines
# that match the pattern, under a heading "title: NAME".
ab_tables() {
  local items=$1 title=$2 keep=$3 item name round v values
  shift 3
  for item in $items; do
    name=${item%%=*}
    echo; echo "## $title: $name ($(basename "$1")${2:+ ${*:2}})"
    for round in $(seq "${AB_ROUNDS:-2}"); do
      IFS=, read -r -a values <<< "${item#*=}"
      for v in "${values[@]}"; do
        echo; echo "### $name=$v, round $round"; echo
        env "$name=$v" timeout 120 "$@" 2>&1 | grep -E "$keep"
      done
    done
  done >> "$OUT/bench_layers.md" 2>&1
}
if [ -n "${AB:-}" ]; then
  stage ab
  eval "AB_ARGS=(${AB_BENCH_ARGS:---iters 5 --batches 1 --prefill 0 --graph 0})"
  ab_tables "$AB" "A/B" '^\| (window|Full|Reindex|Reuse|role|---|[0-9])' \
    "$BUILD/bench/cuda_layer_bench" "${AB_ARGS[@]}"
fi
# The decode GEMVs and MoE steps alone under each value (cuda_gemv_bench).
if [ -n "${GEMV_AB:-}" ]; then
  stage gemv_ab
  ab_tables "$GEMV_AB" "GEMV A/B" '^\| ' "$BUILD/bench/cuda_gemv_bench"
fi

# Per-kernel device time and DRAM bytes (Nsight Compute reads the counters on the Firecracker
# machines; elsewhere it says why not) of decode steps of two roles at batch 1 and of one role's
# 2048-token prefill, condensed by tools/gpu/ncu_table.py and appended to the layer table: where
# a layer's time goes. The benchmark's weight fills are left out. PROFILE=0 skips it
# (a QUICK call skips it unless PROFILE=1).
if [ "${PROFILE:-$([ "${QUICK:-0}" = 1 ] && echo 0 || echo 1)}" = 1 ]; then
  stage profile
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  profile() {  # title, then cuda_layer_bench's arguments
    local title=$1; shift
    echo; echo "## Per-kernel profile (ncu): $title"; echo
    if [ -z "$NCU" ]; then echo "ncu not found"; return; fi
    run_for 90 "$NCU" --clock-control none --print-summary per-kernel \
      --kernel-name regex:'^(?!.*fill_kernel)' \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum \
      "$BUILD/bench/cuda_layer_bench" --iters 1 --copy-mb 64 --gemm-n 512 "$@" \
      > "$OUT/ncu.tmp" 2>&1
    python3 tools/gpu/ncu_table.py < "$OUT/ncu.tmp" || tail -20 "$OUT/ncu.tmp"
    rm -f "$OUT/ncu.tmp"
  }
  { profile "decode, batch 1, two roles (5 steps each)" --batches 1 --prefill 0 --max-roles 2 --graph 0
    [ "${PROFILE_PREFILL:-1}" = 1 ] &&
      profile "prefill of 2048 tokens, one role (2 runs)" --batches "" --prefill 2048 --max-roles 1
  } >> "$OUT/bench_layers.md" 2>&1
fi

# The decode GEMVs of a layer's shapes at 1..8 rows (one row in a QUICK call) and MoE steps at 1
# and 8 rows against the copy bandwidth, each beside a plain read of its weights (a few seconds),
# appended to the layer table.
if [ "${GEMV:-1}" = 1 ]; then
stage bench_gemv
GEMV_ARGS=(); [ "${QUICK:-0}" = 1 ] && GEMV_ARGS=(--rows 1)
{ echo; echo "## Decode GEMVs and MoE steps (bench/cuda_gemv_bench ${GEMV_ARGS[*]})"; echo
  run_for 60 "$BUILD/bench/cuda_gemv_bench" "${GEMV_ARGS[@]}"; echo "exit $?"; } \
  >> "$OUT/bench_layers.md" 2>&1
fi

if [ "${QUICK:-0}" != 1 ]; then

stage bench_model
run_for 70 "$BUILD/bench/cuda_model_bench" --runs 3 > "$OUT/bench_model.md" 2>&1
echo "exit $?" >> "$OUT/bench_model.md"

if [ "${CLI:-1}" = 1 ]; then
stage cli
{ "$BUILD/bin/flashdesk-cli" version
  for b in cpu cuda; do
    echo "--- $b"
    run_for 40 "$BUILD/bin/flashdesk-cli" generate --model assets/models/flash-tiny --backend "$b" \
      --prompt "Hi! My name is Quinn." --thinking off --max-tokens 16 --json
  done
  for b in cpu cuda; do
    echo "--- $b, 4-digit addition with thinking at effort 50"
    run_for 30 "$BUILD/bin/flashdesk-cli" generate --model assets/models/flash-tiny --backend "$b" \
      --prompt "What is 4821 + 3377?" --effort 50 --max-tokens 300 --json
  done
  # The demo eval, two items per cell (pictures included), on both backends.
  for b in cpu cuda; do
    echo "--- eval $b"
    run_for 20 "$BUILD/bin/flashdesk-cli" eval --suite demo --model assets/models/flash-tiny \
      --backend "$b" --limit 2 --prefill exact
  done
} > "$OUT/cli.log" 2>&1
fi  # CLI

fi  # QUICK

stage golden
[ -n "$TESTS_BUILD" ] && wait "$TESTS_BUILD"
if [ -n "$TESTS_BUILD" ] && [ -x "$BUILD/tests/engine_tests" ]; then
  run_for 10 "$BUILD/tests/engine_tests" --gtest_filter='*Golden*cuda*:HybridExperts.*:StepGraphs.*:ShardedModel.OneGpu*:SyntheticCheckpoint.DrawnOnTheGpu*' >> "$OUT/golden.log" 2>&1
  echo "golden exit $?" >> "$OUT/golden.log"
fi

# Stall reasons and source hot spots of chosen kernels (tools/gpu/ncu_detail.sh), when DETAIL
# names them (a CLI=0 call leaves room for the file among the eight that come back).
if [ -n "${DETAIL:-}" ]; then
  stage detail
  export KERNELS="$DETAIL" BUILD
  run_for 15 bash tools/gpu/ncu_detail.sh
fi

stage summary
{
  echo "# CUDA backend on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  echo; echo "run took $(( $(date +%s) - START )) s"
  echo; echo "## cuda_tests"; grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|tests ran" "$OUT/cuda_tests.log" | head -40
  echo; echo "largest measured errors (of $(grep -c measure "$OUT/cuda_tests.log") comparisons):"
  grep "measure" "$OUT/cuda_tests.log" |
    awk '{for (i = 1; i <= NF; i++) if ($i == "worst") print $(i + 1), $0}' | sort -g | tail -25 |
    cut -d' ' -f2-
  echo; echo "## golden (cuda)"; grep -E "^\[  (PASSED|FAILED) \]|^\[       OK|^\[  FAILED  \]|tests ran" "$OUT/golden.log" | head -20
  echo; echo "## flash-tiny through the CLI"
  grep -E "^---|answer_ids" "$OUT/cli.log" | cut -c1-160
  sed -n '/^--- eval/,$p' "$OUT/cli.log" | grep -vE '^[.]+$'
  echo; cat "$OUT/bench_layers.md"; echo; cat "$OUT/bench_model.md"
} > "$OUT/summary.md" 2>&1
cat "$OUT/summary.md"
