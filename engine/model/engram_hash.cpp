// Engram hash ids in int64 arithmetic exactly as the reference's NgramHashState.
#include "engine/model/engram_hash.h"

#include <limits>

#include "engine/util/error.h"

namespace flashdesk {

EngramHasher::EngramHasher(const TextConfig& text, EngramHashTables tables,
                           const std::string& source)
    : max_ngram_(text.engram_max_ngram_size),
      heads_(text.engram_n_heads),
      columns_((text.engram_max_ngram_size - 1) * text.engram_n_heads),
      tables_(std::move(tables)) {
  const size_t n_layers = text.engram_layer_ids.size();
  const int64_t vocab_c = text.engram_compressed_vocab_size;
  if (tables_.multipliers.size() != n_layers)
    throw FormatError(source, "multipliers: expected " + std::to_string(n_layers) + " layers");
  if (text.engram_pad_token_id < 0 ||
      text.engram_pad_token_id >= static_cast<int64_t>(tables_.token_map.size()))
    throw FormatError(source, "token_map: no entry for engram_pad_token_id");
  for (size_t i = 0; i < tables_.token_map.size(); ++i)
    if (tables_.token_map[i] < 0 || tables_.token_map[i] >= vocab_c)
      throw FormatError(source, "token_map[" + std::to_string(i) + "] outside [0, " +
                                    std::to_string(vocab_c) + ")");
  pad_ = tables_.token_map[static_cast<size_t>(text.engram_pad_token_id)];
  // c * mu must fit in int64 for every compressed id c < vocab_c.
  const int64_t bound = std::numeric_limits<int64_t>::max() / std::max<int64_t>(1, vocab_c);
  for (size_t l = 0; l < n_layers; ++l) {
    if (static_cast<int64_t>(tables_.multipliers[l].size()) != max_ngram_)
      throw FormatError(source,
                        "multipliers: expected " + std::to_string(max_ngram_) + " per layer");
    for (int64_t m : tables_.multipliers[l])
      if (m <= 0 || m > bound)
        throw FormatError(source, "multipliers: value " + std::to_string(m) + " out of range");
  }
  FD_CHECK(tables_.primes.size() == n_layers, "engram primes: one list per layer");
  offsets_.resize(n_layers);
  for (size_t l = 0; l < n_layers; ++l) {
    FD_CHECK(static_cast<int64_t>(tables_.primes[l].size()) == columns_,
             "engram primes: one per (n-gram, head)");
    int64_t sum = 0;
    for (int64_t p : tables_.primes[l]) {
      offsets_[l].push_back(sum);
      sum += p;
    }
  }
}

void EngramHasher::hash(int64_t li, std::span<const int32_t> tokens, std::span<const uint8_t> dead,
                        std::span<const int64_t> positions, int64_t* out) const {
  const auto& mult = tables_.multipliers[static_cast<size_t>(li)];
  const auto& primes = tables_.primes[static_cast<size_t>(li)];
  const auto& offsets = offsets_[static_cast<size_t>(li)];
  std::vector<int64_t> c(static_cast<size_t>(max_ngram_));
  for (size_t r = 0; r < positions.size(); ++r) {
    const int64_t p = positions[r];
    bool cut = false;  // a look-back before 0 or through a dead token pads this and later shifts
    for (int64_t k = 0; k < max_ngram_; ++k) {
      const int64_t q = p - k;
      cut = cut || q < 0 || (!dead.empty() && dead[static_cast<size_t>(q)]);
      if (cut) {
        c[k] = pad_;
        continue;
      }
      const int32_t id = tokens[static_cast<size_t>(q)];
      if (id < 0 || id >= static_cast<int64_t>(tables_.token_map.size()))
        throw InvalidRequest("token id " + std::to_string(id) + " has no Engram compressed id");
      c[k] = tables_.token_map[static_cast<size_t>(id)];
    }
    int64_t h = c[0] * mult[0];
    int64_t* o = out + static_cast<int64_t>(r) * columns_;
    for (int64_t n = 1; n < max_ngram_; ++n) {
      h ^= c[n] * mult[n];  // the (n+1)-gram hash
      for (int64_t j = 0; j < heads_; ++j) {
        const int64_t col = (n - 1) * heads_ + j;
        o[col] = h % primes[col] + offsets[col];
      }
    }
  }
}

}  // namespace flashdesk
