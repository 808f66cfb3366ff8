#!/usr/bin/env bash
# The DSpark goldens of the official DeepSeek-V4.1 code (issue 19, docs/goldens.md) in one device
# call: writes the test-dspark random checkpoint with flashdesk-cli make-random (seed 3), runs the
# official forward + forward_spec on it (tools/official_dspark_goldens.py, the GPU machine's
# python3 with torch >= 2.9, on its CPU), copies the golden into tests/data/goldens/dspark/ of
# this tree and, where an engine_tests build is found, runs GoldenDsparkOfficial on every backend
# it has (cuda included). Writes under $OUT (4 files at most):
#   official-every-role.safetensors  official-manifest.json  (to commit in tests/data/goldens/dspark/)
#   official_dspark.log  golden_dspark_official.log
# Run from the root of a source tree: `OUT=... bash tools/gpu/official_dspark.sh`.
# Environment: OUT (required); OFFICIAL, the official inference/ copy (default
# .official/inference); CLI, a flashdesk-cli (default: the first of build/engine-only/bin and
# .carry-*/build/engine-only/bin; when there is none, a CPU-only one is built into
# build/dspark-cli with the deps/ folder of this tree or of .carry-*, as tools/gpu/run.sh does);
# TESTS=0 skips the C++ test; THREADS (default nproc); BUDGET_S (default 190).
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
START=$(date +%s)
BUDGET_S=${BUDGET_S:-190}
OUT=${OUT:?set OUT to the output directory}
OFFICIAL=${OFFICIAL:-.official/inference}
THREADS=${THREADS:-$(nproc)}
mkdir -p "$OUT"
LOG="$OUT/official_dspark.log"
left() { echo $(( START + BUDGET_S - $(date +%s) )); }
# A command under the time left minus a reserve for the stages after it (at least 5 s).
run_for() { local reserve=$1; shift; local t=$(( $(left) - reserve )); (( t < 5 )) && t=5; timeout "$t" "$@"; }
stage() { echo "== $1 ($(( $(date +%s) - START )) s in, $(left) s left)" | tee -a "$LOG"; }
: > "$LOG"

stage "env"
{ python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  nproc; ls "$OFFICIAL"; } >> "$LOG" 2>&1
python3 tools/official_dspark_goldens.py --official "$OFFICIAL" --check-source >> "$LOG" 2>&1 ||
  { echo "the official copy at $OFFICIAL lacks what the script calls (above)" | tee -a "$LOG"; exit 1; }

stage "flashdesk-cli"
if [ -z "${CLI:-}" ]; then
  for c in build/engine-only/bin/flashdesk-cli .carry-*/build/engine-only/bin/flashdesk-cli; do
    [ -x "$c" ] && { CLI=$c; break; }
  done
fi
if [ -z "${CLI:-}" ]; then
  DEPS=
  for d in deps .carry-*/deps; do [ -d "$d" ] && { DEPS=$(readlink -f "$d"); break; }; done
  DEPS_ARGS=()
  if [ -n "$DEPS" ]; then
    DEPS_ARGS=(-DCMAKE_PREFIX_PATH="$DEPS" -DCMAKE_INCLUDE_PATH="$DEPS/include"
               -DCMAKE_LIBRARY_PATH="$DEPS/lib")
    export LD_LIBRARY_PATH="$DEPS/lib:${LD_LIBRARY_PATH:-}"
  fi
  echo "no flashdesk-cli found: building a CPU-only one (deps: ${DEPS:-none})" | tee -a "$LOG"
  run_for 60 cmake -S . -B build/dspark-cli -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFLASHDESK_UI=OFF -DFLASHDESK_CUDA=OFF -DFLASHDESK_WERROR=OFF "${DEPS_ARGS[@]}" >> "$LOG" 2>&1 &&
  run_for 50 cmake --build build/dspark-cli -j "$THREADS" --target flashdesk-cli \
    >> "$LOG" 2>&1
  CLI=build/dspark-cli/bin/flashdesk-cli
fi
[ -x "$CLI" ] || { echo "no flashdesk-cli ($CLI)" | tee -a "$LOG"; exit 1; }
echo "cli: $CLI" >> "$LOG"

stage "checkpoint"
CKPT=$(mktemp -d)/test-dspark
"$CLI" make-random --config assets/configs/test-dspark.json --out "$CKPT" --seed 3 >> "$LOG" 2>&1 ||
  { echo "make-random failed" | tee -a "$LOG"; exit 1; }
sha256sum "$CKPT"/* >> "$LOG"

stage "official goldens"
run_for 10 python3 tools/official_dspark_goldens.py --official "$OFFICIAL" \
  --model "$CKPT" --out-dir "$OUT" --threads "$THREADS" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "official_dspark_goldens.py exit $rc" | tee -a "$LOG"; exit 1; }
mkdir -p tests/data/goldens/dspark
cp "$OUT/official-every-role.safetensors" "$OUT/official-manifest.json" tests/data/goldens/dspark/

if [ "${TESTS:-1}" = 1 ]; then
  stage "GoldenDsparkOfficial"
  TLOG="$OUT/golden_dspark_official.log"
  BUILD=
  for b in build/engine-only .carry-*/build/engine-only; do
    [ -f "$b/CMakeCache.txt" ] && { BUILD=$b; break; }
  done
  if [ -z "$BUILD" ]; then
    echo "no engine_tests build (build/engine-only or .carry-*/build/engine-only): C++ test not run" |
      tee "$TLOG" | tee -a "$LOG"
  else
    for d in deps "$BUILD/../../deps"; do
      [ -d "$d/lib" ] && export LD_LIBRARY_PATH="$(readlink -f "$d")/lib:${LD_LIBRARY_PATH:-}"
    done
    export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
    # a carried tree reads assets and test data through links to this one (as run.sh makes them)
    SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
    for d in assets tests/data; do
      [ -n "$SRC" ] && [ ! -e "$SRC/$d" ] && ln -s "$PWD/$d" "$SRC/$d"
    done
    run_for 20 cmake --build "$BUILD" -j "$THREADS" --target engine_tests \
      > "$TLOG" 2>&1
    echo "engine_tests build exit $? ($BUILD)" >> "$TLOG"
    run_for 3 "$BUILD/tests/engine_tests" \
      --gtest_filter='*GoldenDsparkOfficial*' >> "$TLOG" 2>&1
    echo "GoldenDsparkOfficial exit $?" >> "$TLOG"
    grep -E "dspark official|^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|^\[  FAILED  \]|exit" "$TLOG" |
      tee -a "$LOG"
  fi
fi
stage "done"
ls -l "$OUT" | tee -a "$LOG"
