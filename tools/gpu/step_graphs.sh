#!/usr/bin/env bash
# Step graphs on the GPU (docs/cuda-backend.md "Step graphs"), after tools/gpu/run.sh built the
# engine-only tree in the same device call: the step-graph tests and the CUDA goldens with graphs
# on (a whole step one graph, and parts of a layer), flash-tiny's decode with plain launches,
# replays and captures alternating run by run, then with parts of 0 / 1 / 4 layers, and the
# layer bench's graph columns and its steps of several layers (where the host's matching of a
# step overlaps the device). Writes $OUT/step_graphs.md. Environment: OUT (required), BUDGET_S
# (default 240), STACK (layers of the layer bench's steps, default 8).
#   QUICK=1 GOLDEN=1 CLI=0 PROFILE=0 BUDGET_S=200 bash tools/gpu/run.sh; bash tools/gpu/step_graphs.sh
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
START=$(date +%s)
BUDGET_S=${BUDGET_S:-240}
OUT=${OUT:?set OUT to the output directory}
BUILD=build/engine-only
[ -d deps ] && export LD_LIBRARY_PATH="$PWD/deps/lib:${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
left() { echo $(( START + BUDGET_S - $(date +%s) )); }
# A command under the time left minus a reserve for the stages after it.
run_for() { local reserve=$1; shift; local t=$(( $(left) - reserve )); (( t < 5 )) && t=5; timeout "$t" "$@"; }
section() { echo; echo "## $1 ($(( $(date +%s) - START )) s in)"; echo; }

{
  section "engine_tests: step graphs and the CUDA goldens, graphs on (whole steps, then parts of a layer)"
  for parts in 0 1; do
    echo "FLASHDESK_CUDA_GRAPH=1 FLASHDESK_CUDA_GRAPH_PART_LAYERS=$parts:"
    FLASHDESK_CUDA_GRAPH=1 FLASHDESK_CUDA_GRAPH_PART_LAYERS=$parts run_for 170 \
      "$BUILD/tests/engine_tests" --gtest_filter='StepGraphs.*:*GoldenOfficial*cuda*' 2>&1 |
      grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |measure|Failure|exit' | head -60
  done
  section "flash-tiny: launches, replays, captures (cuda_model_bench --runs 5)"
  run_for 110 "$BUILD/bench/cuda_model_bench" --runs 5 --ab FLASHDESK_CUDA_GRAPH=0,1,capture
  section "flash-tiny: replays in parts of 0, 1 and 4 layers"
  FLASHDESK_CUDA_GRAPH=1 run_for 70 "$BUILD/bench/cuda_model_bench" --runs 5 \
    --ab FLASHDESK_CUDA_GRAPH_PART_LAYERS=0,1,4
  section "full-shape layers: graph columns, steps of ${STACK:-8} layers"
  run_for 5 "$BUILD/bench/cuda_layer_bench" --iters 10 --batches 1,8 --prefill 0 --graph 1 \
    --stack "${STACK:-8}" --parts 1,2,4
  echo "exit $?"
} > "$OUT/step_graphs.md" 2>&1
tail -40 "$OUT/step_graphs.md"
