#!/bin/sh
# Rebuilds sessions-v1.sqlite, the committed schema-version-1 database that schema_test.cpp opens:
# the version-1 flashdesk-cli imports sessions-v1.json, then (with the sqlite3 shell) a continued
# answer is left half-logged, as a crash leaves it, and one KV block row is added. Only rerun this
# with the build of the commit that introduced schema version 1; later versions must keep reading
# the committed file as it is.
set -eu
cli=${1:?usage: make_sessions_v1.sh path/to/flashdesk-cli}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cli" sessions import "$here/sessions-v1.json" --data-dir "$tmp" > /dev/null
sqlite3 "$tmp/sessions.sqlite" <<'SQL'
INSERT INTO messages (session_id, ordinal, role, text, thinking, token_ids, status, created_ms, updated_ms)
  VALUES (1, 2, 'assistant', 'It', '', x'14000000', 'interrupted', 1700000300000, 1700000300000);
INSERT INTO answers (message_id, started_ms)
  VALUES ((SELECT id FROM messages WHERE session_id = 1 AND ordinal = 2), 1700000300000);
INSERT INTO answer_tokens (answer_id, first, token_ids, text, thinking)
  VALUES ((SELECT id FROM answers), 0, x'15000000', ' is', '');
INSERT INTO answer_tokens (answer_id, first, token_ids, text, thinking)
  VALUES ((SELECT id FROM answers), 1, x'16000000', ' red', '');
INSERT INTO kv_blocks (key, parent_key, model_fingerprint, token_count, file_size, checksum, created_ms, last_used_ms)
  VALUES ('0123456789abcdef0123456789abcdef', NULL, 'flash-tiny-fixture', 256, 228096, 12345, 1700000200000, 1700000200000);
INSERT INTO session_kv_blocks (session_id, key) VALUES (1, '0123456789abcdef0123456789abcdef');
PRAGMA wal_checkpoint(TRUNCATE);
VACUUM;
SQL
cp "$tmp/sessions.sqlite" "$here/sessions-v1.sqlite"
echo "wrote $here/sessions-v1.sqlite"
