// Copies the block store's and the window pool's counters into the panel's CacheStats.
#include "ui/cache_stats.h"

namespace flashdesk::ui {

CacheStats cache_stats_of(storage::PersistentChat& chat) {
  const storage::KvStoreStats blocks = chat.blocks().stats();
  const storage::WindowPoolStats pool = chat.window_pool().stats();
  CacheStats s;
  s.has_caches = true;
  s.ssd_blocks = blocks.blocks;
  s.ssd_bytes = blocks.bytes;
  s.block_reads_hit = blocks.reads_hit;
  s.block_reads_missed = blocks.reads_missed;
  s.block_writes_failed = blocks.writes_failed;
  s.pool_entries = pool.entries;
  s.pool_bytes = pool.bytes;
  s.pool_budget_bytes = pool.budget_bytes;
  return s;
}

}  // namespace flashdesk::ui
