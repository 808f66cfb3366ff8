// Engram hash multipliers from the numpy port (engine/util/numpy_random.h).
#include "engine/checkpoint/engram_multipliers.h"

#include <algorithm>
#include <limits>

#include "engine/util/error.h"
#include "engine/util/numpy_random.h"

namespace flashdesk {

std::vector<std::vector<int64_t>> engram_multipliers(std::span<const int64_t> layer_ids,
                                                     int64_t max_ngram_size,
                                                     int64_t compressed_vocab_size) {
  FD_CHECK(compressed_vocab_size >= 1 && max_ngram_size >= 0,
           "engram multipliers: compressed vocab size must be positive");
  const int64_t bound =
      std::max<int64_t>(1, (std::numeric_limits<int64_t>::max() / compressed_vocab_size) / 2);
  std::vector<std::vector<int64_t>> rows;
  for (int64_t layer : layer_ids) {
    FD_CHECK(layer >= 0, "engram multipliers: negative layer id");
    numpy_random::Pcg64 generator(static_cast<uint64_t>(layer) * 10007u);
    std::vector<int64_t> row =
        numpy_random::integers(generator, 0, bound, static_cast<size_t>(max_ngram_size));
    for (int64_t& v : row) v = v * 2 + 1;
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<std::vector<int64_t>> engram_multipliers(const TextConfig& text) {
  return engram_multipliers(text.engram_layer_ids, text.engram_max_ngram_size,
                            text.engram_compressed_vocab_size);
}

}  // namespace flashdesk
