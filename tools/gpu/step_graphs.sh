#!/usr/bin/env bash
# Step graphs on the GPU (docs/cuda-backend.md "Step graphs"), after tools/gpu/run.sh built the
# engine-only tree in the same device call: the step-graph tests and the CUDA goldens with graphs
# on (a whole step one graph, and parts of a layer), flash-tiny's decode with the default
# (FLASHDESK_CUDA_GRAPH=auto), plain launches and graphs alternating run by run, on a long and on a
# short prompt, DSpark's verification steps through the CLI, and the layer bench's steps of
# several layers at flash-tiny's and at full shapes (launches, one graph, parts, and the way
# auto's trial chose). Writes $OUT/step_graphs.md.
# Environment: OUT (required), BUDGET_S (default 330; each stage keeps a reserve for the ones
# after it, so a budget much below the default cuts the early stages to 5 s), STACK (layers of
# the layer bench's steps, default 8).
#   QUICK=1 GOLDEN=1 CLI=0 PROFILE=0 BUDGET_S=200 bash tools/gpu/run.sh; bash tools/gpu/step_graphs.sh
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
START=$(date +%s)
BUDGET_S=${BUDGET_S:-330}
OUT=${OUT:?set OUT to the output directory}
BUILD=build/engine-only
source tools/gpu/after_run.sh

{
  section "engine_tests: step graphs and the CUDA goldens, graphs on (whole steps, then parts of a layer)"
  for parts in 0 1; do
    echo "FLASHDESK_CUDA_GRAPH=1 FLASHDESK_CUDA_GRAPH_PART_LAYERS=$parts:"
    FLASHDESK_CUDA_GRAPH=1 FLASHDESK_CUDA_GRAPH_PART_LAYERS=$parts run_for 200 \
      "$BUILD/tests/engine_tests" --gtest_filter='StepGraphs*:*GoldenOfficial*cuda*' 2>&1 |
      grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |measure|Failure|exit' | head -60
  done
  section "flash-tiny: the default (auto) against launches and graphs (cuda_model_bench --runs 5)"
  run_for 150 "$BUILD/bench/cuda_model_bench" --runs 5 --ab FLASHDESK_CUDA_GRAPH=auto,0,1
  section "flash-tiny, a 16-token prompt (short context: steps before index_topk entries)"
  run_for 110 "$BUILD/bench/cuda_model_bench" --runs 3 --prompt 16 --ab FLASHDESK_CUDA_GRAPH=0,1
  section "flash-tiny through the CLI, DSpark verifying a 4-digit sum's thinking (graphs auto, 0, 1 and 1 with 16 records a segment, in turn)"
  DSPARK=("$BUILD/bin/flashdesk-cli" generate --model assets/models/flash-tiny --backend cuda
    --speculative dspark --effort 50 --max-tokens 300 --prompt "What is 4821 + 3377?" --json)
  for round in 1 2 3; do
    for v in "FLASHDESK_CUDA_GRAPH=auto" "FLASHDESK_CUDA_GRAPH=0" "FLASHDESK_CUDA_GRAPH=1" \
             "FLASHDESK_CUDA_GRAPH=1 FLASHDESK_CUDA_GRAPH_RECORDS=16"; do
      printf '%s round %s: ' "$v" "$round"
      # shellcheck disable=SC2086
      run_for 100 env $v "${DSPARK[@]}" 2>&1 |
        grep -oE '"(decode_tokens_per_s|generated_tokens|verifies)":[0-9.]+' | tr '\n' ' '
      echo
    done
  done
  for r in 4 16; do
    echo "stops of a traced run, graphs on, $r records a segment (count, then the most frequent causes):"
    run_for 90 env FLASHDESK_CUDA_GRAPH=1 FLASHDESK_CUDA_GRAPH_RECORDS=$r \
      FLASHDESK_STEP_GRAPH_TRACE=1 "${DSPARK[@]}" 2>&1 >/dev/null | grep 'replay stopped' \
      > "$OUT/stops.tmp"
    wc -l < "$OUT/stops.tmp"
    sed -E 's/segment [0-9]+: //; s/op [0-9]+/op N/; s/0x[0-9a-f]+/X/g' "$OUT/stops.tmp" |
      cut -c1-150 | sort | uniq -c | sort -rn | head -6
    rm -f "$OUT/stops.tmp"
  done
  section "flash-tiny's layers: steps of ${STACK:-8} layers"
  run_for 70 "$BUILD/bench/cuda_layer_bench" --config assets/models/flash-tiny/config.json \
    --iters 20 --batches 1 --prefill 0 --graph 0 --stack "${STACK:-8}" --parts 1,4 --copy-mb 256 \
    --gemm-n 1024
  section "full-shape layers: graph columns, steps of ${STACK:-8} layers"
  run_for 5 "$BUILD/bench/cuda_layer_bench" --iters 10 --batches 1,8 --prefill 0 --graph 1 \
    --stack "${STACK:-8}" --parts 1,2
  echo "exit $?"
} > "$OUT/step_graphs.md" 2>&1
tail -40 "$OUT/step_graphs.md"
