// Growth of the per-sequence global KV buffers.
#include "engine/model/sequence_state.h"

#include <algorithm>

namespace flashdesk {

int64_t SequenceState::global_bytes() const {
  int64_t bytes = 0;
  for (const auto& g : global)
    if (g.entries.defined()) bytes += g.n_entries * (g.entries.dim(1) + g.index_keys.dim(1));
  return bytes;
}

void reserve_entries(Backend& backend, GlobalKv& kv, int64_t n) {
  if (n <= kv.capacity()) return;
  const int64_t cap = std::max<int64_t>({n, 2 * kv.capacity(), 64});
  auto grow = [&](Tensor& t) {
    Tensor bigger = backend.zeros(DType::U8, Shape{cap, t.dim(1)});
    if (kv.n_entries > 0) {
      Tensor dst = bigger.rows(0, kv.n_entries);
      backend.copy(t.rows(0, kv.n_entries), dst);
    }
    t = bigger;
  };
  grow(kv.entries);
  grow(kv.index_keys);
}

GlobalKvRows read_global_kv(Backend& backend, const GlobalKv& kv, int64_t first, int64_t n) {
  FD_CHECK(first >= 0 && n >= 0 && first + n <= kv.n_entries, "read_global_kv: rows out of range");
  GlobalKvRows r;
  r.n = n;
  r.entries.resize(static_cast<size_t>(n * kv.entries.dim(1)));
  r.index_keys.resize(static_cast<size_t>(n * kv.index_keys.dim(1)));
  if (n == 0) return r;
  backend.read(kv.entries.rows(first, n), r.entries.data(), r.entries.size());
  backend.read(kv.index_keys.rows(first, n), r.index_keys.data(), r.index_keys.size());
  return r;
}

void restore_global_kv(Backend& backend, GlobalKv& kv, const GlobalKvRows& rows) {
  FD_CHECK(rows.entries.size() == static_cast<size_t>(rows.n * kv.entries.dim(1)) &&
               rows.index_keys.size() == static_cast<size_t>(rows.n * kv.index_keys.dim(1)),
           "restore_global_kv: row bytes do not match the cache formats");
  kv.n_entries = 0;
  kv.n_pending = 0;
  reserve_entries(backend, kv, rows.n);
  if (rows.n > 0) {
    Tensor e = kv.entries.rows(0, rows.n), k = kv.index_keys.rows(0, rows.n);
    backend.write(e, rows.entries.data(), rows.entries.size());
    backend.write(k, rows.index_keys.data(), rows.index_keys.size());
  }
  kv.n_entries = rows.n;
}

}  // namespace flashdesk
