#!/usr/bin/env bash
# The official goldens of the demo model (docs/goldens.md, `GoldenOfficial.FlashTiny*`) in one
# device call, for when flash-tiny's weights change: runs the official DeepSeek-V4.1 code
# (tools/official_goldens.py, the GPU machine's python3 with torch >= 2.9, on its CPU) on
# MODEL with the committed golden's own prompt ids (the 175-token notes prompt; the ids depend on
# the tokenizer only) and 32 decode steps. Writes under $OUT:
#   flash-tiny-blocks.safetensors  flash-tiny-manifest.json  flash-tiny-decode-defect.json
#   official_flash_tiny.log        (and flash-tiny-diag.safetensors, diagnosis only)
# Then, on the development machine, `python3 tools/update_official_golden.py FILES_AT` checks
# them and puts them in tests/data/goldens/official/, and `/usr/bin/python3
# tools/official_order_noise.py` measures the new golden's summation-order noise.
# Run from the root of a source tree: `OUT=... bash tools/gpu/official_flash_tiny.sh`.
# Environment: OUT (required); OFFICIAL, the official inference/ copy (default
# .official/inference); MODEL (default assets/models/flash-tiny); THREADS (default nproc);
# PYTHON (default python3; for a plumbing run on a torch without float8, "/usr/bin/python3
# tools/official_emulated.py").
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
START=$(date +%s)
OUT=${OUT:?set OUT to the output directory}
OFFICIAL=${OFFICIAL:-.official/inference}
MODEL=${MODEL:-assets/models/flash-tiny}
THREADS=${THREADS:-$(nproc)}
PYTHON=${PYTHON:-python3}
GOLDEN=tests/data/goldens/official/flash-tiny.safetensors
mkdir -p "$OUT"
LOG="$OUT/official_flash_tiny.log"
: > "$LOG"
stage() { echo "== $1 ($(( $(date +%s) - START )) s in)" | tee -a "$LOG"; }

stage "env"
{ python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  nproc; ls "$OFFICIAL" "$MODEL"; sha256sum "$MODEL"/*.safetensors; } >> "$LOG" 2>&1
[ -f "$OFFICIAL/model.py" ] || { echo "no official copy at $OFFICIAL" | tee -a "$LOG"; exit 1; }

stage "prompt ids"
IDS=$(mktemp --suffix=.json)
python3 - "$GOLDEN" "$IDS" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
sys.path.insert(0, "tools")
from flashdesk_ref.safetensors import SafeTensorsFile
ids = SafeTensorsFile(sys.argv[1]).get("prompt_ids")
json.dump([int(v) for v in ids], open(sys.argv[2], "w"))
print(f"{len(ids)} prompt ids from {sys.argv[1]}")
EOF
[ -s "$IDS" ] || { echo "no prompt ids" | tee -a "$LOG"; exit 1; }

stage "official goldens"
$PYTHON tools/official_goldens.py --official "$OFFICIAL" --model "$MODEL" --ids "$IDS" \
  --decode 32 --name flash-tiny --out-dir "$OUT" --threads "$THREADS" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || { echo "official_goldens.py exit $rc" | tee -a "$LOG"; exit 1; }
stage "done"
ls -l "$OUT" | tee -a "$LOG"
