// Engram n-gram hash ids (docs/model-spec.md §7 "Hash ids"): each token's compressed id and its
// predecessors' are mixed per n-gram size with the layer's odd multipliers (rolling XOR of
// products) and reduced modulo one prime per (n-gram size, head), offset into the layer's table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/config.h"

namespace flashdesk {

struct EngramHashTables {
  std::vector<int64_t> token_map;                 // compressed id of each token id
  std::vector<std::vector<int64_t>> multipliers;  // [n_engram_layers][max_ngram_size]
  std::vector<std::vector<int64_t>> primes;       // [n_engram_layers][(max_ngram - 1) * heads]
};

class EngramHasher {
 public:
  // Validates the tables against the config (sizes, ranges, overflow bounds of the products);
  // throws FormatError naming `source` and the field.
  EngramHasher(const TextConfig& text, EngramHashTables tables, const std::string& source);

  int64_t map_size() const { return static_cast<int64_t>(tables_.token_map.size()); }
  int64_t n_layers() const { return static_cast<int64_t>(tables_.primes.size()); }
  // Ids per token and layer: (max_ngram - 1) * heads, n-gram size major, head minor.
  int64_t columns() const { return columns_; }

  // Ids [positions.size(), columns()] for Engram layer index `li` (into engram_layer_ids) of the
  // tokens at `positions` of the sequence `tokens` (every token id so far; dead[i] != 0 marks an
  // image-span token, which cuts the look-back). Offsets of the layer's tables included.
  // Throws InvalidRequest for a token id outside the map.
  void hash(int64_t li, std::span<const int32_t> tokens, std::span<const uint8_t> dead,
            std::span<const int64_t> positions, int64_t* out) const;

 private:
  int64_t max_ngram_ = 0;
  int64_t heads_ = 0;
  int64_t columns_ = 0;
  int64_t pad_ = 0;  // compressed id of engram_pad_token_id
  EngramHashTables tables_;
  std::vector<std::vector<int64_t>> offsets_;  // running sums of each layer's primes
};

}  // namespace flashdesk
