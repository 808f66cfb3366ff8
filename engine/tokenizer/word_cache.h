// Cache of BPE results per piece: most pieces of real text repeat ("the", " of", "\n\n").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tokenizer/bpe_model.h"

namespace flashdesk {

// Not thread-safe: the tokenizer guards it with a mutex (and encodes uncached when busy).
class WordCache {
 public:
  // Pieces longer than this are rarely repeated and are not cached.
  static constexpr size_t kMaxPieceBytes = 64;
  // Bounds memory: past this many entries the cache starts over.
  static constexpr size_t kMaxEntries = 1 << 16;

  // Appends the cached ids of `piece` to `out`; false when it is not cached.
  bool find(std::string_view piece, std::vector<int32_t>& out) const {
    const auto it = map_.find(piece);
    if (it == map_.end()) return false;
    const auto [offset, count] = it->second;
    out.insert(out.end(), pool_.begin() + offset, pool_.begin() + offset + count);
    return true;
  }

  void insert(std::string_view piece, std::span<const int32_t> ids) {
    if (map_.size() >= kMaxEntries) {
      map_.clear();
      pool_.clear();
    }
    const auto offset = static_cast<uint32_t>(pool_.size());
    pool_.insert(pool_.end(), ids.begin(), ids.end());
    map_.emplace(std::string(piece), std::make_pair(offset, static_cast<uint32_t>(ids.size())));
  }

 private:
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, StringHash, std::equal_to<>> map_;
  std::vector<int32_t> pool_;
};

}  // namespace flashdesk
