#!/usr/bin/env bash
# Trains flash-tiny on the GPU machine in runs of a few minutes (see tools/train/README.md).
#
#   tools/train/device_run.sh 8m        # train for 8 minutes of wall clock, then save
#   tools/train/device_run.sh 300       # train 300 more steps (at most 9 minutes)
#   tools/train/device_run.sh export    # no training: export the model to $OUT/model
#   tools/train/device_run.sh bench     # throughput table of a few settings variants
#
# Resumes from out/flash-tiny-resume (carried from the previous run's $OUT/resume) or from
# out/flash-tiny-state/full.pt (FP32 weights + AdamW moments, left on the machine by the
# previous call while it stayed warm), whichever is newer. Writes under $OUT:
#   resume/  weights-NNN.safetensors (<= 15 MiB each), state.json, train_log.csv, eval_log.csv
#   run.log  the run's output;   model/ (export only) the checkpoint directory.
# Extra arguments go to train.py (e.g. --set lr=1e-3 --final-eval).
set -euo pipefail
cd "$(dirname "$0")/../.."
START=$(date +%s)
ARG=${1:-8m}
shift || true
PY=${PYTHON:-python3}
OUT=${OUT:?set OUT to the output directory}
SETTINGS=${SETTINGS:-tools/train/configs/flash-tiny.json}
RESUME=out/flash-tiny-resume
STATE=out/flash-tiny-state/full.pt
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
mkdir -p "$OUT"
# To the output, not a file: the device tool brings back at most 8 files and resume/ needs 7.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true

# --checkpoint-every: a call cut short by the device's time limit still brings back its latest state.
common=(--settings "$SETTINGS" --resume "$RESUME" --full-state "$STATE" --checkpoint-every 120)
case "$ARG" in
  bench)
    # The settings file against the plain settings and the candidate not measured yet
    # (tools/train/README.md, Throughput).
    exec "$PY" tools/train/bench.py --settings "$SETTINGS" --steps 3 --phase-step 1300 \
      --variant 'base:' --variant 'plain:mhc_impl="loop";tf32=false' --variant 'sorted:moe_impl="sorted"' \
      "$@" 2>&1 | tee "$OUT/bench.txt"
    ;;
  export)
    "$PY" tools/train/train.py "${common[@]}" --minutes 0 --no-save --export "$OUT/model" "$@" \
      2>&1 | tee "$OUT/run.log"
    ;;
  *m)
    MIN=${ARG%m}
    DEADLINE=$(( START + ${MIN%.*} * 60 ))
    "$PY" tools/train/train.py "${common[@]}" --deadline "$DEADLINE" --out "$OUT/resume" "$@" \
      2>&1 | tee "$OUT/run.log"
    ;;
  *)
    DEADLINE=$(( START + 9 * 60 ))
    "$PY" tools/train/train.py "${common[@]}" --deadline "$DEADLINE" --steps "$ARG" \
      --out "$OUT/resume" "$@" 2>&1 | tee "$OUT/run.log"
    ;;
esac
