// Cache of BPE results per piece: most pieces of real text repeat ("the", " of", "\n\n").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tokenizer/string_id_map.h"

namespace flashdesk {

// Not thread-safe: the tokenizer guards it with a mutex (and encodes uncached when busy).
class WordCache {
 public:
  // Longer pieces are rarely repeated and are not cached. Long whitespace runs (indentation,
  // padding) do repeat and cost the most to merge, hence not a smaller limit.
  static constexpr size_t kMaxPieceBytes = 1024;
  // Bound memory: past this many entries, or ids plus key bytes, the cache starts over.
  static constexpr size_t kMaxEntries = 1 << 16;
  static constexpr size_t kMaxBytes = 16 << 20;

  // Appends the cached ids of `piece` to `out`; false when it is not cached.
  bool find(std::string_view piece, std::vector<int32_t>& out) const {
    const auto entry = map_.find(piece);
    if (!entry) return false;
    const auto [offset, count] = spans_[*entry];
    out.insert(out.end(), pool_.begin() + offset, pool_.begin() + offset + count);
    return true;
  }

  void insert(std::string_view piece, std::span<const int32_t> ids) {
    bytes_ += piece.size() + ids.size() * sizeof(int32_t);
    if (spans_.size() >= kMaxEntries || bytes_ > kMaxBytes) {
      bytes_ = piece.size() + ids.size() * sizeof(int32_t);
      map_.clear();
      spans_.clear();
      pool_.clear();
    }
    if (!map_.insert(piece, static_cast<int32_t>(spans_.size()))) return;
    spans_.emplace_back(static_cast<uint32_t>(pool_.size()), static_cast<uint32_t>(ids.size()));
    pool_.insert(pool_.end(), ids.begin(), ids.end());
  }

 private:
  StringIdMap map_;                                   // piece -> index into spans_
  std::vector<std::pair<uint32_t, uint32_t>> spans_;  // (offset, count) in pool_
  std::vector<int32_t> pool_;
  size_t bytes_ = 0;
};

}  // namespace flashdesk
