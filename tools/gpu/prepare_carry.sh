#!/usr/bin/env bash
# Packs what tools/gpu/run.sh needs on the GPU machine into DIR/carry.tar.xz: this checkout's
# build inputs (engine, app, bench, storage, tests without their data, cmake files, tools/gpu),
# uncommitted files included, and the third-party build inputs (pack_deps.sh). The device call
# then runs `cd DIR && tar xJf carry.tar.xz && bash tools/gpu/run.sh`; assets and test data are
# read from the checkout DIR sits in (run.sh links them). Compressed, because what a device call
# carries counts against its size limit together with the whole checkout.
#   tools/gpu/prepare_carry.sh DIR
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
DIR=${1:?usage: prepare_carry.sh DIR}
mkdir -p "$DIR"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
tools/gpu/pack_deps.sh "$STAGE" > /dev/null
paths=(engine app bench cmake storage tests tools/gpu packaging CMakeLists.txt CMakePresets.json)
{ git ls-files -- "${paths[@]}"; git ls-files --others --exclude-standard -- "${paths[@]}"; } |
  grep -v '^tests/data/' | sort -u > "$STAGE/files.txt"
tar cf - -T "$STAGE/files.txt" -C "$STAGE" deps | xz -9 -T2 > "$DIR/carry.tar.xz"
echo "$(wc -l < "$STAGE/files.txt") files + deps: $(du -h "$DIR/carry.tar.xz" | cut -f1) in $DIR/carry.tar.xz"
