#!/usr/bin/env bash
# One device call that trains flash-tiny on and leaves a model ready to ship: trains for DURATION
# (device_run.sh's `Nm` runs), exports the model from the compact checkpoint it just saved (the
# export this machine makes from the same files, byte for byte; the 2026-12-07 runs o-q checked
# the sha256), and runs the official goldens on that export (tools/gpu/official_flash_tiny.sh,
# about a minute of the machine's CPU). A model trained in a call of its own would need a second
# call for its goldens, and a fresh machine start costs more device time than the goldens.
#
#   SETTINGS=tools/train/configs/flash-tiny-sizes.json OUT=$OUT \
#     tools/train/device_run_golden.sh 7m --set total_steps=2020
#
# Writes under $OUT (the device tool brings back at most 8 files): resume/ (7 files, as
# device_run.sh) and goldens.tgz (goldens/: the official run's blocks, manifest, decode-defect and
# log, the export's sha256, the training's run.log). Then, on the development machine:
#   /usr/bin/python3 tools/train/train.py --settings S --resume FILES_AT/resume --minutes 0 \
#     --no-save --export DIR          # the same shards as goldens/sha.txt
#   tar xzf FILES_AT/goldens.tgz -C /tmp && python3 tools/update_official_golden.py /tmp/goldens
#   /usr/bin/python3 tools/official_order_noise.py   # the new golden's summation-order noise
# (the last two once the shards are in assets/models/flash-tiny). Needs .official/inference in
# the call's carry. DURATION leaves room for the export and goldens: 7m in a 600 s call. Exit
# status: the training's, or 2 when only the official run failed (resume/ is still complete).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
DURATION=${1:?usage: device_run_golden.sh DURATION [train.py args]}
shift
OUT=${OUT:?set OUT to the output directory}
PY=${PYTHON:-python3}
SETTINGS=${SETTINGS:-tools/train/configs/flash-tiny.json}
WORK=$(mktemp -d)
GOLDENS=$WORK/goldens
mkdir -p "$GOLDENS"

SETTINGS=$SETTINGS OUT=$OUT PYTHONUNBUFFERED=1 tools/train/device_run.sh "$DURATION" "$@"
rc=$?
mv "$OUT/run.log" "$GOLDENS/" 2>/dev/null
if [ "$rc" = 0 ]; then
  # From the compact checkpoint (BF16 masters), not the machine's FP32 state: the export made
  # here and the one made later on the development machine are then the same bytes.
  "$PY" tools/train/train.py --settings "$SETTINGS" --resume "$OUT/resume" --minutes 0 \
    --no-save --export "$WORK/model" > "$GOLDENS/export.log" 2>&1
  # The shipped layout: the DSpark head's shard and the index that lists it stay as they are.
  cp assets/models/flash-tiny/model-dspark.safetensors \
    assets/models/flash-tiny/model.safetensors.index.json "$WORK/model/"
  (cd "$WORK/model" && sha256sum ./*.safetensors) | tee "$GOLDENS/sha.txt"
  # A failed official run still brings the training back; the call's status says it failed.
  OUT=$GOLDENS MODEL=$WORK/model bash tools/gpu/official_flash_tiny.sh > "$GOLDENS/stdout.txt" 2>&1 ||
    rc=2
  tail -3 "$GOLDENS/stdout.txt"
  rm -f "$GOLDENS/flash-tiny-diag.safetensors"  # diagnosis only, and 13 MB
fi
tar czf "$OUT/goldens.tgz" -C "$WORK" goldens
ls -l "$OUT" "$OUT/resume"
exit "$rc"
