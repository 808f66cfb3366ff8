#!/usr/bin/env bash
# Where the time of chosen decode kernels goes (Nsight Compute sections: speed of light,
# occupancy, launch statistics, warp stall reasons, memory workload, source hot spots), one profiled launch per
# kernel name, from cuda_layer_bench's batch-1 decode of its first two layer roles, or from the
# benchmark arguments in BENCH_ARGS (a prefill's kernels: BENCH_ARGS="--batches '' --prefill 8192
# --max-roles 1" SKIP=0, since its kernels launch once a run). Run after tools/gpu/run.sh has
# configured build/engine-only (or with BUILD set); writes OUT/ncu_detail.txt.
#   OUT=dir [KERNELS="a b c"] [BENCH_ARGS="..."] [SKIP=launches] bash tools/gpu/ncu_detail.sh
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
OUT=${OUT:?set OUT}
BUILD=${BUILD:-build/engine-only}
KERNELS=${KERNELS:-"attn_scores_kernel attn_block_kernel hc_mix_kernel indexer_select_kernel expert_up_kernel expert_down_kernel route_kernel"}
BENCH_ARGS=${BENCH_ARGS:-"--batches 1 --prefill 0 --max-roles 2"}
eval "ARGS=($BENCH_ARGS)"  # quoted words kept: --batches '' names no batch
SKIP=${SKIP:-2}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu not found" > "$OUT/ncu_detail.txt"; exit 0; }
for k in $KERNELS; do
  echo "=================== $k"
  timeout 120 "$NCU" --clock-control none -k "regex:^$k" --launch-skip "$SKIP" -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
    "$BUILD/bench/cuda_layer_bench" --iters 1 --copy-mb 64 --gemm-n 512 "${ARGS[@]}" \
    2>&1 | grep -v "^ *----" | grep -v "^ *$" | head -160
done > "$OUT/ncu_detail.txt" 2>&1
