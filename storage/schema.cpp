// Forward migrations of the session database, one function per schema version.
#include "storage/schema.h"

#include <array>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "storage/digest.h"
#include "storage/file_util.h"
#include "storage/sqlite_db.h"

namespace flashdesk::storage {

namespace {

// Version 1. Times are milliseconds since the Unix epoch (UTC). Token ids are little-endian int32
// arrays. Digests and block keys are 32 lower-case hex digits (XXH3-128, see digest.h); from
// version 2 on, attachment digests are 64 (SHA-256).
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE sessions (
  id                INTEGER PRIMARY KEY,
  title             TEXT    NOT NULL,
  created_ms        INTEGER NOT NULL,
  updated_ms        INTEGER NOT NULL,
  model_fingerprint TEXT    NOT NULL,
  effort            INTEGER NOT NULL CHECK (effort BETWEEN 1 AND 100),
  thinking          INTEGER NOT NULL CHECK (thinking IN (0, 1)),
  system_prompt     TEXT    NOT NULL,
  temperature       REAL    NOT NULL,
  top_p             REAL    NOT NULL,
  seed              INTEGER NOT NULL,
  max_new_tokens    INTEGER NOT NULL
);
CREATE INDEX sessions_by_update ON sessions(updated_ms);

-- A message being generated is already a row, with status 'interrupted' until it is finished:
-- whatever happens to the process, the stored status is true.
CREATE TABLE messages (
  id         INTEGER PRIMARY KEY,
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  ordinal    INTEGER NOT NULL,
  role       TEXT    NOT NULL CHECK (role IN ('user', 'assistant')),
  text       TEXT    NOT NULL,
  thinking   TEXT    NOT NULL,
  token_ids  BLOB    NOT NULL,
  status     TEXT    NOT NULL CHECK (status IN ('complete', 'interrupted')),
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  UNIQUE (session_id, ordinal)
);

-- One row (and one file under the data folder) per distinct image content.
CREATE TABLE attachments (
  digest     TEXT    PRIMARY KEY,
  path       TEXT    NOT NULL,
  mime_type  TEXT    NOT NULL,
  byte_size  INTEGER NOT NULL,
  created_ms INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE message_attachments (
  message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  position   INTEGER NOT NULL,
  digest     TEXT    NOT NULL REFERENCES attachments(digest),
  PRIMARY KEY (message_id, position)
) WITHOUT ROWID;
CREATE INDEX message_attachments_by_digest ON message_attachments(digest);

-- The token write-ahead log: an answer in progress and its committed token groups. On finish (or
-- on the next start after a crash) the groups are folded into the message and the rows deleted.
CREATE TABLE answers (
  id         INTEGER PRIMARY KEY,
  message_id INTEGER NOT NULL UNIQUE REFERENCES messages(id) ON DELETE CASCADE,
  started_ms INTEGER NOT NULL
);
CREATE TABLE answer_tokens (
  answer_id  INTEGER NOT NULL REFERENCES answers(id) ON DELETE CASCADE,
  first      INTEGER NOT NULL,  -- index of the group's first token within the logged tokens
  token_ids  BLOB    NOT NULL,
  text       TEXT    NOT NULL,
  thinking   TEXT    NOT NULL,
  PRIMARY KEY (answer_id, first)
) WITHOUT ROWID;

-- The SSD KV block store's index: one row per block file (see docs/kv-block-store.md).
CREATE TABLE kv_blocks (
  key               TEXT    PRIMARY KEY,
  parent_key        TEXT,
  model_fingerprint TEXT    NOT NULL,
  token_count       INTEGER NOT NULL,
  file_size         INTEGER NOT NULL,
  checksum          INTEGER NOT NULL,  -- XXH3-64 of the payload, as a signed 64-bit integer
  created_ms        INTEGER NOT NULL,
  last_used_ms      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX kv_blocks_by_use ON kv_blocks(last_used_ms);

-- Which sessions' prompts use which blocks, so deleting a session erases the blocks only it used.
-- Not a foreign key to kv_blocks: a block may be evicted while the session stays.
CREATE TABLE session_kv_blocks (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  key        TEXT    NOT NULL,
  PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
CREATE INDEX session_kv_blocks_by_key ON session_kv_blocks(key);
)sql";

void migrate_to_v1(Database& db) {
  db.exec(kSchemaV1);
}

// Version 2: attachments are keyed by the SHA-256 of their bytes instead of XXH3-128 (64 hex digits
// instead of 32), so two different images can never be stored as one. Every attachment file is
// read and hashed; its row gets the new digest and a path named by it (a hard link to the same
// file, or a copy; the old name is left to the next repair, which removes files no row names), and
// every message link follows. A row whose file is missing or unreadable keeps its path and gets a
// digest derived from its old one, which no content can have: the message keeps the attachment it
// had, and reading it fails as it did before.
constexpr const char* kAttachmentRowsV1 = "SELECT digest, path FROM attachments";
constexpr const char* kCopyAttachmentRow =
    "INSERT OR IGNORE INTO attachments (digest, path, mime_type, byte_size, created_ms) "
    "SELECT ?2, ?3, mime_type, byte_size, created_ms FROM attachments WHERE digest = ?1";
constexpr const char* kRelinkAttachment =
    "UPDATE message_attachments SET digest = ?2 WHERE digest = ?1";
constexpr const char* kDeleteAttachmentRowV1 = "DELETE FROM attachments WHERE digest = ?1";

struct AttachmentKeyChange {
  std::string old_digest, new_digest, new_path;
};

// The SHA-256 name of one attachment file, linked into place; or the fallback for a missing file.
AttachmentKeyChange rekey_attachment(const std::filesystem::path& attachments_dir,
                                     const std::string& old_digest, const std::string& old_path) {
  namespace fs = std::filesystem;
  std::vector<uint8_t> bytes;
  try {
    bytes = read_whole_file(attachments_dir / old_path);
  } catch (const IoError&) {
    const Digest256 marker =
        sha256(as_bytes("flashdesk: attachment missing at migration to "
                        "schema 2, XXH3-128 " +
                        old_digest));
    return {old_digest, marker.hex(), old_path};
  }
  const std::string hex = sha256(bytes).hex();
  const fs::path rel = fs::path(hex.substr(0, 2)) / hex;
  const fs::path target = attachments_dir / rel;
  std::error_code ec;
  if (!fs::exists(target, ec)) {
    fs::create_directories(target.parent_path(), ec);
    fs::create_hard_link(attachments_dir / old_path, target, ec);
    if (ec) {
      const std::span<const uint8_t> parts[] = {bytes};
      write_file_atomic(target, parts);
    }
  }
  return {old_digest, hex, rel.string()};
}

void migrate_to_v2(Database& db) {
  const std::filesystem::path attachments_dir = db.path().parent_path() / "attachments";
  std::vector<AttachmentKeyChange> changes;
  for (Query q = db.query(kAttachmentRowsV1); q.step();)
    changes.push_back(rekey_attachment(attachments_dir, q.text(0), q.text(1)));
  for (const AttachmentKeyChange& c : changes) {
    db.query(kCopyAttachmentRow).with(c.old_digest, c.new_digest, c.new_path).run();
    db.query(kRelinkAttachment).with(c.old_digest, c.new_digest).run();
    db.query(kDeleteAttachmentRowV1).with(c.old_digest).run();
  }
}

// Version 3: how an answer ended, so a restart shows it as the live view did: the time its
// reasoning took (milliseconds; -1 unknown, as for every answer of versions 1 and 2) and whether
// the user stopped it (its status is 'interrupted' either way; 0 for earlier answers, which
// cannot tell a stop from a crash).
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE messages ADD COLUMN thinking_ms INTEGER NOT NULL DEFAULT -1 CHECK (thinking_ms >= -1);
ALTER TABLE messages ADD COLUMN stopped INTEGER NOT NULL DEFAULT 0 CHECK (stopped IN (0, 1));
)sql";

void migrate_to_v3(Database& db) {
  db.exec(kSchemaV3);
}

using Migration = void (*)(Database&);
// kMigrations[i] takes a database from version i to version i + 1.
constexpr std::array<Migration, kSchemaVersion> kMigrations = {migrate_to_v1, migrate_to_v2,
                                                                  migrate_to_v3};

}  // namespace

int64_t schema_version(Database& db) {
  return db.scalar_int64("PRAGMA user_version");
}

void migrate(Database& db) {
  Transaction tx(db);  // BEGIN IMMEDIATE: two processes opening at once migrate one after another
  const int64_t found = schema_version(db);
  if (found > kSchemaVersion)
    throw FormatError(db.path().string(),
                      "schema version " + std::to_string(found) +
                          " is newer than this FlashDesk understands (up to " +
                          std::to_string(kSchemaVersion) +
                          "); refusing to open it so nothing is lost: update FlashDesk");
  if (found < 0)
    throw FormatError(db.path().string(), "invalid schema version " + std::to_string(found));
  for (int64_t v = found; v < kSchemaVersion; ++v) {
    kMigrations[static_cast<size_t>(v)](db);
    db.exec(("PRAGMA user_version = " + std::to_string(v + 1)).c_str());
  }
  tx.commit();
}

}  // namespace flashdesk::storage
