#!/bin/sh
# Rebuilds sessions-v1-attachments/, the committed schema-version-1 data folder (database and
# attachment files) that schema_test.cpp migrates: the version-1 flashdesk-cli imports
# sessions-v1-attachments.json (two images, one of them attached twice, named by XXH3-128). Only
# rerun this with a build of schema version 1 (e.g. commit 8c0af02); later versions must keep
# migrating the committed folder as it is.
set -eu
cli=${1:?usage: make_sessions_v1_attachments.sh path/to/version-1/flashdesk-cli}
here=$(cd "$(dirname "$0")" && pwd)
out="$here/sessions-v1-attachments"
rm -rf "$out"
"$cli" sessions import "$here/sessions-v1-attachments.json" --data-dir "$out" > /dev/null
sqlite3 "$out/sessions.sqlite" 'PRAGMA wal_checkpoint(TRUNCATE); VACUUM;'
rm -rf "$out/kv" "$out/flashdesk.lock" "$out/sessions.sqlite-wal" "$out/sessions.sqlite-shm"
echo "wrote $out"
