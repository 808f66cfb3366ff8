// The SQL of the KV block index (tables kv_blocks and session_kv_blocks): one small function per
// query. Callers own the connection and any transaction.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "storage/kv_block_key.h"

namespace flashdesk::storage {

class Database;

struct BlockRow {
  BlockKey key;
  std::optional<BlockKey> parent;
  std::string model_fingerprint;
  int64_t token_count = 0;
  int64_t file_size = 0;
  uint64_t checksum = 0;  // XXH3-64 of the payload
  int64_t created_ms = 0;
  int64_t last_used_ms = 0;
};

namespace block_index {

void insert(Database& db, const BlockRow& row);
std::optional<BlockRow> find(Database& db, const BlockKey& key);
bool contains(Database& db, const BlockKey& key);
void erase(Database& db, const BlockKey& key);
// Erases the row only if it is still the one created at `created_ms`; returns whether it did.
bool erase_if_created(Database& db, const BlockKey& key, int64_t created_ms);
void touch(Database& db, const BlockKey& key, int64_t now_ms);
// Links the block to the session's prompt; false when the session no longer exists.
bool link_session(Database& db, int64_t session_id, const BlockKey& key);

int64_t total_bytes(Database& db);
int64_t count(Database& db);
// Least recently used first (ties: newest first, so a chain loses its tail before its head).
std::vector<BlockRow> least_recently_used(Database& db, int64_t limit);
std::vector<BlockRow> unused_since(Database& db, int64_t cutoff_ms);
// Blocks whose parent is not stored: no prefix walk can reach them.
std::vector<BlockRow> unreachable(Database& db);
std::vector<BlockRow> all(Database& db);

}  // namespace block_index
}  // namespace flashdesk::storage
