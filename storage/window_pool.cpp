// The DRAM window pool: a map plus an LRU list, TTL checked on every access.
#include "storage/window_pool.h"

#include <unistd.h>

namespace flashdesk::storage {

uint64_t WindowPool::default_budget_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 30;  // unknown: 1 GiB
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 10;
}

WindowPool::WindowPool(WindowPoolOptions options) : options_(std::move(options)) {
  if (options_.budget_bytes == 0) options_.budget_bytes = default_budget_bytes();
}

void WindowPool::remove_locked(std::map<Slot, Entry>::iterator it) {
  bytes_ -= it->second.snapshot->bytes.size();
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

int64_t WindowPool::expire_locked(int64_t now) {
  int64_t n = 0;
  // The LRU tail is the least recently used: expired entries gather there.
  while (!lru_.empty()) {
    auto it = entries_.find(lru_.back());
    if (now - it->second.last_used_ms < options_.ttl.count()) break;
    remove_locked(it);
    ++n;
  }
  counters_.expired += n;
  return n;
}

bool WindowPool::park(WindowKey key, std::vector<uint8_t> bytes) {
  if (bytes.size() > options_.budget_bytes) return false;
  std::lock_guard lock(mutex_);
  const int64_t now = options_.clock();
  expire_locked(now);
  const Slot slot{key.session_id, key.token_count};
  if (auto it = entries_.find(slot); it != entries_.end()) remove_locked(it);
  while (bytes_ + bytes.size() > options_.budget_bytes && !lru_.empty()) {
    remove_locked(entries_.find(lru_.back()));
    ++counters_.evicted;
  }
  bytes_ += bytes.size();
  lru_.push_front(slot);
  auto snapshot = std::make_shared<const WindowSnapshot>(WindowSnapshot{key, std::move(bytes)});
  entries_[slot] = Entry{std::move(snapshot), now, lru_.begin()};
  return true;
}

std::shared_ptr<const WindowSnapshot> WindowPool::find(const WindowKey& key) {
  std::lock_guard lock(mutex_);
  const int64_t now = options_.clock();
  expire_locked(now);
  auto it = entries_.find({key.session_id, key.token_count});
  if (it == entries_.end() || it->second.snapshot->key.prefix != key.prefix) {
    ++counters_.misses;
    return nullptr;
  }
  ++counters_.hits;
  it->second.last_used_ms = now;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.snapshot;
}

std::vector<int64_t> WindowPool::token_counts(int64_t session_id) {
  std::lock_guard lock(mutex_);
  expire_locked(options_.clock());
  std::vector<int64_t> counts;
  for (auto it = entries_.lower_bound({session_id, INT64_MIN});
       it != entries_.end() && it->first.first == session_id; ++it)
    counts.push_back(it->first.second);
  return {counts.rbegin(), counts.rend()};
}

void WindowPool::drop_session(int64_t session_id) {
  std::lock_guard lock(mutex_);
  auto it = entries_.lower_bound({session_id, INT64_MIN});
  while (it != entries_.end() && it->first.first == session_id) remove_locked(it++);
}

int64_t WindowPool::expire() {
  std::lock_guard lock(mutex_);
  return expire_locked(options_.clock());
}

WindowPoolStats WindowPool::stats() {
  std::lock_guard lock(mutex_);
  WindowPoolStats s = counters_;
  s.entries = static_cast<int64_t>(entries_.size());
  s.bytes = bytes_;
  s.budget_bytes = options_.budget_bytes;
  return s;
}

}  // namespace flashdesk::storage
