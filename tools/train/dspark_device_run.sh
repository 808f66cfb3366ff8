#!/usr/bin/env bash
# Trains flash-tiny's DSpark draft head on the GPU machine (tools/train/README.md, "DSpark head").
#
#   OUT=... tools/train/dspark_device_run.sh 7m [extra dspark_train.py arguments]
#
# Runs from the repository root of the carried tree (the target is assets/models/flash-tiny,
# tracked; nothing else needs carrying). Trains for the given wall-clock minutes in all (model
# load, generation of the target's own continuations, training, export) and writes under $OUT
# (5 files, each < 15 MiB):
#   head/config.json, head/model.safetensors.index.json, head/model-dspark.safetensors
#                  the head in the published layout (evaluate with dspark_eval.py --head;
#                  ship into flash-tiny with dspark_export.py ship)
#   dspark_log.csv per-step losses, first-row accuracy, accepted drafts per block, dev figure
#   run.log        the run's output
# A later call can continue from a head: carry it (e.g. out/dspark-head) and pass
# --init-head out/dspark-head (the exported FP8/FP4 values become the masters; moments restart).
set -euo pipefail
cd "$(dirname "$0")/../.."
START=$(date +%s)
ARG=${1:-7m}
shift || true
PY=${PYTHON:-python3}
OUT=${OUT:?set OUT to the output directory}
case "$ARG" in
  *m) MIN=${ARG%m} ;;
  *) echo "usage: dspark_device_run.sh MINUTESm [args]" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
DEADLINE=$(awk -v s="$START" -v m="$MIN" 'BEGIN { printf "%d", s + m * 60 }')
"$PY" tools/train/dspark_train.py --out "$OUT" --deadline "$DEADLINE" \
  --seqs 64 --anchors 64 --gen-prompts 384 --gen-tokens 96 --gen-chunk 192 --gen-time 0.3 --gen-share 0.3 --cache-batches 96 "$@" \
  2>&1 | tee "$OUT/run.log"
