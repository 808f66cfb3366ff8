// Deterministic random weights for test and benchmark checkpoints: a documented PRNG (so the
// Python tools could reproduce a checkpoint) and the value distribution of each tensor kind.
//
// Stream: value (tensor T, row r, column c) comes from the splitmix64 sequence seeded with
// row_seed(seed, T, r); pairs of uniforms give pairs of normals by Box-Muller. Rows are
// independent, so any chunking or thread count writes the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/checkpoint/config.h"

namespace flashdesk {

// splitmix64 (Steele, Lea, Flood 2014): state += 0x9E3779B97F4A7C15, output = mix(state).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next();
  // Uniform in [0, 1): the top 53 bits of next() times 2^-53.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  // Two standard normals from two uniforms u1, u2 (Box-Muller): r = sqrt(-2 ln(1 - u1)),
  // z0 = r cos(2 pi u2), z1 = r sin(2 pi u2).
  void normal_pair(double& z0, double& z1);

  static uint64_t mix(uint64_t z);

 private:
  uint64_t state_;
};

// FNV-1a 64-bit of a name (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a64(std::string_view text);

// Seed of row `row` of tensor `name`: mix(mix(seed ^ fnv1a64(name)) + row). FP8/FP4 weights and
// their scales share the stream of the ".weight" name (the scales are derived, not drawn).
uint64_t row_seed(uint64_t seed, std::string_view name, int64_t row);

// How a tensor's values are drawn: value[c] = mean(c) + std * z, z ~ N(0, 1).
struct InitRule {
  double std = 0;
  double mean = 0;
  // mHC base [(2 + h) h]: pre and post entries mean 0, the h x h combination matrix mean
  // `comb_diagonal` on its diagonal (streams mostly keep to themselves after Sinkhorn).
  bool hc_base = false;
  int64_t hc_mult = 0;
  double comb_diagonal = 0;

  double mean_at(int64_t column) const;
};

// The rule for `name` with logical [rows, cols] (documented in docs/checkpoint-format.md):
// linear weights N(0, 1/cols); embeddings and Engram tables N(0, 1); norm weights 1 + 0.02 N;
// attention sinks N(0, 1); biases 0.01 N; mHC fn N(0, (0.5 / sqrt(hc * dim))^2), scale
// 1 + 0.05 N, base as above.
InitRule init_rule(std::string_view name, int64_t cols, const TextConfig& text);

// Fills `out[0..n)` with row `row` of tensor `name`.
void random_row(uint64_t seed, std::string_view name, int64_t row, const InitRule& rule, float* out,
                int64_t n);

}  // namespace flashdesk
