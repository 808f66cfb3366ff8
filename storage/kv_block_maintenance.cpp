// KvBlockStore upkeep: eviction (retention, disk budget, unreachable blocks) and the start-up
// reconciliation of block files with index rows.
#include <system_error>
#include <unordered_map>

#include "storage/file_util.h"
#include "storage/kv_block_file.h"
#include "storage/kv_block_index.h"
#include "storage/kv_block_store.h"
#include "storage/sqlite_db.h"

namespace flashdesk::storage {

namespace fs = std::filesystem;

namespace {
constexpr int64_t kEvictionChunk = 64;  // rows per LRU query while over budget
}

// Rows in one transaction, files after the commit: a crash in between leaves orphan files, which
// start-up removes; never a row without its file.
void KvBlockStore::erase_blocks(Database& db, std::span<const BlockRow> rows) {
  if (rows.empty()) return;
  {
    Transaction tx(db);
    for (const BlockRow& row : rows) block_index::erase(db, row.key);
    tx.commit();
  }
  for (const BlockRow& row : rows)
    remove_file_if_present(block_file_path(layout_.kv_dir(), row.key));
}

EvictionReport KvBlockStore::evict_with(Database& db) {
  EvictionReport report;
  const int64_t cutoff = options_.clock() - options_.retention.count();
  const std::vector<BlockRow> expired = block_index::unused_since(db, cutoff);
  erase_blocks(db, expired);
  report.expired = static_cast<int64_t>(expired.size());
  for (const BlockRow& row : expired) report.bytes_freed += row.file_size;

  const auto budget = static_cast<int64_t>(options_.disk_budget_bytes);
  int64_t total = block_index::total_bytes(db);
  while (total > budget) {
    std::vector<BlockRow> rows = block_index::least_recently_used(db, kEvictionChunk);
    if (rows.empty()) break;
    size_t n = 0;
    for (; n < rows.size() && total > budget; ++n) total -= rows[n].file_size;
    rows.resize(n);
    erase_blocks(db, rows);
    report.over_budget += static_cast<int64_t>(n);
    for (const BlockRow& row : rows) report.bytes_freed += row.file_size;
  }
  // Dropping a parent strands its descendants: repeat until no stranded block is left.
  for (std::vector<BlockRow> rows = block_index::unreachable(db); !rows.empty();
       rows = block_index::unreachable(db)) {
    erase_blocks(db, rows);
    report.unreachable += static_cast<int64_t>(rows.size());
    for (const BlockRow& row : rows) report.bytes_freed += row.file_size;
  }
  return report;
}

ReconcileReport KvBlockStore::reconcile(Database& db) {
  ReconcileReport report;
  std::unordered_map<BlockKey, BlockRow, Digest128Hash> rows;
  for (BlockRow& row : block_index::all(db)) rows.emplace(row.key, std::move(row));
  std::unordered_map<BlockKey, bool, Digest128Hash> file_ok;  // by key: file of the right size
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(layout_.kv_dir(), ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const fs::path path = it->path();
    if (is_temp_name(path)) {
      report.temp_files += remove_file_if_present(path) ? 1 : 0;
      continue;
    }
    const std::optional<BlockKey> key = key_from_block_file_name(path);
    if (!key) continue;  // not ours: leave it alone
    auto row = rows.find(*key);
    if (row == rows.end() || path != block_file_path(layout_.kv_dir(), *key)) {
      report.orphan_files += remove_file_if_present(path) ? 1 : 0;
      continue;
    }
    file_ok[*key] = static_cast<int64_t>(it->file_size(ec)) == row->second.file_size;
  }
  std::vector<BlockRow> stale;
  for (const auto& [key, row] : rows) {
    auto f = file_ok.find(key);
    if (f == file_ok.end() || !f->second) stale.push_back(row);
  }
  erase_blocks(db, stale);
  report.rows_without_files = static_cast<int64_t>(stale.size());
  report.eviction = evict_with(db);
  return report;
}

}  // namespace flashdesk::storage
