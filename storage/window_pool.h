// The DRAM window pool: window-KV snapshots (the sliding-window rings, opaque bytes from the
// engine) parked at the end of a prompt or of an answer, so the next turn of a live session skips
// encoder bounded replay. Entries expire `ttl` after their last use and the least recently used go
// first when the pool is over its byte budget. Never persisted: a restart starts empty (bounded
// replay rebuilds the window from the SSD blocks). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "storage/digest.h"
#include "storage/storage_layout.h"

namespace flashdesk::storage {

struct WindowPoolOptions {
  uint64_t budget_bytes = 0;  // 0: 10% of physical RAM
  std::chrono::milliseconds ttl = std::chrono::minutes(10);
  Clock clock = system_now_ms;
};

// Which prompt prefix a snapshot belongs to: the session, how many tokens the window has seen, and
// the prefix_digest() of those tokens (so an edited conversation never gets a stale window).
struct WindowKey {
  int64_t session_id = 0;
  int64_t token_count = 0;
  Digest128 prefix;
};

struct WindowSnapshot {
  WindowKey key;
  std::vector<uint8_t> bytes;
};

struct WindowPoolStats {
  int64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t budget_bytes = 0;
  int64_t hits = 0, misses = 0, expired = 0, evicted = 0;
};

class WindowPool {
 public:
  explicit WindowPool(WindowPoolOptions options = {});

  // Parks a snapshot (replacing one with the same session and token count). False when it alone
  // exceeds the budget.
  bool park(WindowKey key, std::vector<uint8_t> bytes);
  // The snapshot for exactly this prefix, or nullptr (absent, expired or a different prefix).
  // Refreshes its TTL and LRU position. The snapshot stays valid while the caller holds it.
  std::shared_ptr<const WindowSnapshot> find(const WindowKey& key);
  // Token counts of the session's snapshots, largest first: the planner's candidates.
  std::vector<int64_t> token_counts(int64_t session_id);
  void drop_session(int64_t session_id);
  int64_t expire();  // drops entries past their TTL; returns how many
  WindowPoolStats stats();

  static uint64_t default_budget_bytes();  // 10% of physical RAM

 private:
  using Slot = std::pair<int64_t, int64_t>;  // (session, token count)
  struct Entry {
    std::shared_ptr<const WindowSnapshot> snapshot;
    int64_t last_used_ms = 0;
    std::list<Slot>::iterator lru;  // position in lru_ (front: most recent)
  };

  void remove_locked(std::map<Slot, Entry>::iterator it);
  int64_t expire_locked(int64_t now);

  WindowPoolOptions options_;
  std::mutex mutex_;
  std::map<Slot, Entry> entries_;
  std::list<Slot> lru_;
  uint64_t bytes_ = 0;
  WindowPoolStats counters_;
};

}  // namespace flashdesk::storage
