// Open-addressing hash map from a token pair to its BPE merge: the inner loop of encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace flashdesk {

struct BpeMerge {
  int32_t rank;    // position in the merges list: lower merges first
  int32_t merged;  // id of the token the pair becomes
};

class MergeTable {
 public:
  explicit MergeTable(size_t expected = 0);

  // Adds a merge, replacing the one the pair had.
  void insert_or_assign(int32_t left, int32_t right, BpeMerge merge);

  const BpeMerge* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == kEmpty) return nullptr;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    BpeMerge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative, so never a key

  static uint64_t pack(int32_t a, int32_t b) {
    return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  void grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace flashdesk
