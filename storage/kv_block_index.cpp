// Queries on the KV block index.
#include "storage/kv_block_index.h"

#include <bit>

#include "storage/sqlite_db.h"

namespace flashdesk::storage::block_index {

namespace {

#define FD_BLOCK_COLUMNS \
  "key, parent_key, model_fingerprint, token_count, file_size, checksum, created_ms, last_used_ms"

constexpr const char* kInsert = "INSERT OR REPLACE INTO kv_blocks (" FD_BLOCK_COLUMNS
                                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
constexpr const char* kFind = "SELECT " FD_BLOCK_COLUMNS " FROM kv_blocks WHERE key = ?1";
constexpr const char* kContains = "SELECT 1 FROM kv_blocks WHERE key = ?1";
constexpr const char* kErase = "DELETE FROM kv_blocks WHERE key = ?1";
constexpr const char* kEraseIfCreated = "DELETE FROM kv_blocks WHERE key = ?1 AND created_ms = ?2";
constexpr const char* kTouch =
    "UPDATE kv_blocks SET last_used_ms = MAX(last_used_ms, ?2) WHERE key = ?1";
constexpr const char* kLinkSession =
    "INSERT OR IGNORE INTO session_kv_blocks (session_id, key) "
    "SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1)";
constexpr const char* kSessionExists = "SELECT 1 FROM sessions WHERE id = ?1";
constexpr const char* kTotalBytes = "SELECT COALESCE(SUM(file_size), 0) FROM kv_blocks";
constexpr const char* kCount = "SELECT COUNT(*) FROM kv_blocks";
constexpr const char* kLeastRecentlyUsed = "SELECT " FD_BLOCK_COLUMNS
                                           " FROM kv_blocks ORDER BY last_used_ms ASC, "
                                           "created_ms DESC, key LIMIT ?1";
constexpr const char* kUnusedSince =
    "SELECT " FD_BLOCK_COLUMNS " FROM kv_blocks WHERE last_used_ms < ?1";
constexpr const char* kUnreachable =
    "SELECT " FD_BLOCK_COLUMNS
    " FROM kv_blocks b WHERE b.parent_key IS NOT NULL AND NOT "
    "EXISTS (SELECT 1 FROM kv_blocks p WHERE p.key = b.parent_key)";
constexpr const char* kAll = "SELECT " FD_BLOCK_COLUMNS " FROM kv_blocks";

#undef FD_BLOCK_COLUMNS

BlockRow read_row(const Query& q) {
  BlockRow r;
  r.key = BlockKey::from_hex(q.text(0)).value_or(BlockKey{});
  if (!q.is_null(1)) r.parent = BlockKey::from_hex(q.text(1));
  r.model_fingerprint = q.text(2);
  r.token_count = q.int64(3);
  r.file_size = q.int64(4);
  r.checksum = std::bit_cast<uint64_t>(q.int64(5));
  r.created_ms = q.int64(6);
  r.last_used_ms = q.int64(7);
  return r;
}

std::vector<BlockRow> read_rows(Query& q) {
  std::vector<BlockRow> rows;
  while (q.step()) rows.push_back(read_row(q));
  return rows;
}

std::optional<std::string> parent_hex(const BlockRow& row) {
  if (!row.parent) return std::nullopt;
  return row.parent->hex();
}

}  // namespace

void insert(Database& db, const BlockRow& row) {
  db.query(kInsert)
      .with(row.key.hex(), parent_hex(row), row.model_fingerprint, row.token_count, row.file_size,
            std::bit_cast<int64_t>(row.checksum), row.created_ms, row.last_used_ms)
      .run();
}

std::optional<BlockRow> find(Database& db, const BlockKey& key) {
  Query q = db.query(kFind);
  q.with(key.hex());
  if (!q.step()) return std::nullopt;
  return read_row(q);
}

bool contains(Database& db, const BlockKey& key) {
  Query q = db.query(kContains);
  return q.with(key.hex()).step();
}

void erase(Database& db, const BlockKey& key) {
  db.query(kErase).with(key.hex()).run();
}

bool erase_if_created(Database& db, const BlockKey& key, int64_t created_ms) {
  db.query(kEraseIfCreated).with(key.hex(), created_ms).run();
  return db.changes() > 0;
}

void touch(Database& db, const BlockKey& key, int64_t now_ms) {
  db.query(kTouch).with(key.hex(), now_ms).run();
}

bool link_session(Database& db, int64_t session_id, const BlockKey& key) {
  db.query(kLinkSession).with(session_id, key.hex()).run();
  if (db.changes() > 0) return true;
  Query q = db.query(kSessionExists);  // no change: either already linked or no such session
  return q.with(session_id).step();
}

int64_t total_bytes(Database& db) {
  return db.scalar_int64(kTotalBytes);
}

int64_t count(Database& db) {
  return db.scalar_int64(kCount);
}

std::vector<BlockRow> least_recently_used(Database& db, int64_t limit) {
  Query q = db.query(kLeastRecentlyUsed);
  q.with(limit);
  return read_rows(q);
}

std::vector<BlockRow> unused_since(Database& db, int64_t cutoff_ms) {
  Query q = db.query(kUnusedSince);
  q.with(cutoff_ms);
  return read_rows(q);
}

std::vector<BlockRow> unreachable(Database& db) {
  Query q = db.query(kUnreachable);
  return read_rows(q);
}

std::vector<BlockRow> all(Database& db) {
  Query q = db.query(kAll);
  return read_rows(q);
}

}  // namespace flashdesk::storage::block_index
