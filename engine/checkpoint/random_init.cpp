// splitmix64, Box-Muller and the per-tensor initialisation rules.
#include "engine/checkpoint/random_init.h"

#include <cmath>
#include <numbers>

namespace flashdesk {

uint64_t SplitMix64::mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::next() {
  state_ += 0x9E3779B97F4A7C15ull;
  return mix(state_);
}

void SplitMix64::normal_pair(double& z0, double& z1) {
  const double u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(1.0 - u1));
  z0 = r * std::cos(2.0 * std::numbers::pi * u2);
  z1 = r * std::sin(2.0 * std::numbers::pi * u2);
}

uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t tensor_stream(uint64_t seed, std::string_view name) {
  return SplitMix64::mix(seed ^ fnv1a64(name));
}

uint64_t row_seed(uint64_t seed, std::string_view name, int64_t row) {
  return SplitMix64::mix(tensor_stream(seed, name) + static_cast<uint64_t>(row));
}

double InitRule::mean_at(int64_t column) const {
  if (!hc_base) return mean;
  const int64_t h = hc_mult;
  if (column < 2 * h) return 0.0;
  const int64_t j = (column - 2 * h) / h, k = (column - 2 * h) % h;
  return j == k ? comb_diagonal : 0.0;
}

InitRule init_rule(std::string_view name, int64_t cols, const TextConfig& t) {
  auto ends = [&](std::string_view s) { return name.ends_with(s); };
  if (ends("_fn")) return {0.5 / std::sqrt(static_cast<double>(t.hc_mult * t.hidden_size))};
  if (ends("_base")) return {0.1, 0.0, true, t.hc_mult, 2.0};
  if (ends("_scale")) return {0.05, 1.0};
  if (ends("norm.weight") || ends("norm1.weight") || ends("norm2.weight") || ends("q_weight") ||
      ends("k_weight"))
    return {0.02, 1.0};
  if (ends("attn_sink")) return {1.0};
  if (ends(".bias") || ends(".bias_vl")) return {0.01};
  if (name == "embed.weight" || ends("engram.embed.weight") || ends("markov_head.embed.weight") ||
      name == "image_start" || name == "image_end" || name == "image_newline")
    return {1.0};
  return {1.0 / std::sqrt(static_cast<double>(cols))};  // linear [out, in]: unit-RMS outputs
}

void random_row(uint64_t seed, std::string_view name, int64_t row, const InitRule& rule, float* out,
                int64_t n) {
  SplitMix64 rng(row_seed(seed, name, row));
  for (int64_t c = 0; c < n; c += 2) {
    double z0, z1;
    rng.normal_pair(z0, z1);
    out[c] = static_cast<float>(rule.mean_at(c) + rule.std * z0);
    if (c + 1 < n) out[c + 1] = static_cast<float>(rule.mean_at(c + 1) + rule.std * z1);
  }
}

}  // namespace flashdesk
