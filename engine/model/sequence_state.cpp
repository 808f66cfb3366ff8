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

}  // namespace flashdesk
