// Engram's hash multipliers (docs/model-spec.md §7 step 3), computed as the official engram.py
// does: for Engram layer L, numpy default_rng(10007 * L).integers(0, bound, max_ngram_size) * 2 + 1
// with bound = max(1, (int64_max // compressed_vocab_size) // 2). Odd, and small enough that
// compressed id x multiplier cannot overflow int64.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/checkpoint/config.h"

namespace flashdesk {

// [layer_ids.size()][max_ngram_size]; compressed_vocab_size >= 1.
std::vector<std::vector<int64_t>> engram_multipliers(std::span<const int64_t> layer_ids,
                                                     int64_t max_ngram_size,
                                                     int64_t compressed_vocab_size);

// The same from the config's engram_layer_ids, engram_max_ngram_size and
// engram_compressed_vocab_size.
std::vector<std::vector<int64_t>> engram_multipliers(const TextConfig& text);

}  // namespace flashdesk
