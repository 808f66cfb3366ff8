#!/usr/bin/env bash
# One model over the GPUs of one host (issues 22 and 23; docs/placement.md "Ranks in one
# process"), after tools/gpu/run.sh configured and built the engine-only tree in the same device
# call: builds what it runs (engine_tests, model_ranks_bench, cuda_allreduce_bench, ...), runs the
# NCCL, drawing and split-model tests (two-GPU ones skip on one GPU), NCCL's all-reduce latency
# at a token's sizes on 1..N GPUs (also in a step graph), then the whole model over RANKS GPUs
# (bench/model_ranks_bench: load, time to the first token of 8K and 64K prompts exact and
# bounded, decode at batches 1, 8 and 32 against the weight-bytes roofline, the KV of a 1M
# context), and a layer of each role decoding at a 1M-token context. Writes $OUT/ranks.md.
# Environment: OUT (required), BUDGET_S (default 500), RANKS (rank counts the bench runs with in
# turn; default: every GPU), MODEL (default V4.1-Flash's config, its weights synthetic, seed 1),
# BENCH_ARGS (model_ranks_bench's other arguments), DRAW (default 1: synthetic weights drawn on
# the GPUs, FLASHDESK_CUDA_DRAW_WEIGHTS).
#   issue 23, four GPUs: QUICK=1 GOLDEN=0 CLI=0 PROFILE=0 BUDGET_S=150 bash tools/gpu/run.sh;
#     bash tools/gpu/ranks.sh
#   issue 22, two GPUs against one (V4.1-Flash's shapes, a layer of each role: 67 GiB):
#     RANKS="1 2" MODEL=assets/configs/deepseek-v4.1-flash-roles.json \
#     BENCH_ARGS="--prompts 8192 --batches 1,8" bash tools/gpu/ranks.sh
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
START=$(date +%s)
BUDGET_S=${BUDGET_S:-500}
OUT=${OUT:?set OUT to the output directory}
BUILD=build/engine-only
source tools/gpu/after_run.sh
GPUS=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
RANKS=${RANKS:-$GPUS}
MODEL=${MODEL:-assets/configs/deepseek-v4.1-flash.json}

{
  echo "# One model over $RANKS of $GPUS GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
  section "build"
  run_for 250 cmake --build "$BUILD" -j "$(nproc)" --target engine_tests model_ranks_bench \
    cuda_allreduce_bench cuda_tests cuda_layer_bench 2>&1 | tail -3
  section "cuda_tests: NCCL and the synthetic weights drawn on the GPU"
  run_for 380 "$BUILD/tests/cuda_tests" --gtest_filter='NcclTest.*:CudaRandomDraw*' 2>&1 |
    grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |drawn:|Failure' | head -40
  section "engine_tests: the split model (two GPUs against one), the goldens over two ranks, a drawing backend's logits"
  run_for 340 "$BUILD/tests/engine_tests" \
    --gtest_filter='ShardedModel.*:SyntheticCheckpoint.DrawnOnTheGpu*:TwoRanks/GoldenOfficialRanks.*' 2>&1 |
    grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |drawn:|Failure|^\[official\]' | head -80
  section "NCCL all-reduce latency at a token's sizes (cuda_allreduce_bench)"
  run_for 300 "$BUILD/bench/cuda_allreduce_bench"
  eval "ARGS=(${BENCH_ARGS:-})"
  for ranks in $RANKS; do
    section "model_ranks_bench ($MODEL, synthetic seed 1, $ranks ranks, DRAW=${DRAW:-1})"
    FLASHDESK_CUDA_DRAW_WEIGHTS=${DRAW:-1} run_for 5 "$BUILD/bench/model_ranks_bench" \
      --model "$MODEL" --synthetic-weights 1 --backend cuda --ranks "$ranks" "${ARGS[@]}" 2>&1
    echo "exit $?"
  done
  # A 1M-token context's decode: each role's layer on GPU 0 with caches of 1M positions (random,
  # no prefill), and the 40 main layers' sum (LONG=0 skips it).
  if [ "${LONG:-1}" = 1 ]; then
    section "decode at a 1M-token context, a layer of each role (cuda_layer_bench, GPU 0)"
    run_for 5 "$BUILD/bench/cuda_layer_bench" --context 1048576 --iters 3 --batches 1 \
      --prefill 0 --graph 0 2>&1
    echo "exit $?"
  fi
} > "$OUT/ranks.md" 2>&1
cat "$OUT/ranks.md"
