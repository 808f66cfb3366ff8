// Open-addressing pair -> merge map (see merge_table.h).
#include "engine/tokenizer/merge_table.h"

#include <algorithm>
#include <bit>

namespace flashdesk {

MergeTable::MergeTable(size_t expected) {
  // Keep the load factor at or below 1/2 so probes stay short.
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, expected * 2));
  slots_.assign(capacity, Slot{kEmpty, {0, 0}});
  mask_ = capacity - 1;
}

void MergeTable::insert_or_assign(int32_t left, int32_t right, BpeMerge merge) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(left, right);
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.merge = merge;
      return;
    }
    if (s.key == kEmpty) {
      s = Slot{key, merge};
      ++size_;
      return;
    }
  }
}

void MergeTable::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(old.size() * 2, Slot{kEmpty, {0, 0}});
  mask_ = slots_.size() - 1;
  size_ = 0;
  for (const Slot& s : old)
    if (s.key != kEmpty)
      insert_or_assign(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xffffffffu),
                       s.merge);
}

}  // namespace flashdesk
