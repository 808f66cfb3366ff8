// The prime table sizes of V4.1 Engram hashing (docs/model-spec.md §7 step 4): each Engram layer
// has one table per (n-gram size 2..max, head), sized by a distinct prime; the rows of a layer's
// embedding are the sum of its primes.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/checkpoint/config.h"

namespace flashdesk {

// Deterministic primality for 0 <= n < 2^63 (Miller-Rabin with a fixed witness set).
bool is_prime(uint64_t n);

// primes[i][n * engram_n_heads + h] for the i-th entry of engram_layer_ids, n-gram size n + 2,
// head h: drawn in that order (layer, n-gram size, head), each the first prime >=
// engram_vocab_size not already used. Offsets of a layer's tables are the running sums.
std::vector<std::vector<int64_t>> engram_primes(const TextConfig& text);

}  // namespace flashdesk
