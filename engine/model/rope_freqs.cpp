// The reference's precompute_freqs_cis, frequencies only: FP32 powers of the base, the YaRN
// correction range in double (Python math), the ramp and the blend in FP32.
#include "engine/model/rope_freqs.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace flashdesk {
namespace {

double correction_dim(double rotations, double dim, double base, double max_seq_len) {
  return dim * std::log(max_seq_len / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(base));
}

}  // namespace

std::vector<float> rope_inv_freq(const TextConfig& text, int64_t compress_ratio) {
  const int64_t dim = text.qk_rope_head_dim, half = dim / 2;
  // Compressed layers rotate at compress_rope_theta, with YaRN when original_seq_len > 0.
  const double base = compress_ratio > 0 ? text.compress_rope_theta : text.rope_theta;
  const bool yarn = compress_ratio > 0 && text.rope_scaling.original_max_position > 0;
  std::vector<float> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    freq[i] = 1.0f / std::pow(static_cast<float>(base), exponent);
  }
  if (!yarn) return freq;
  const RopeScaling& rs = text.rope_scaling;
  const double orig = static_cast<double>(rs.original_max_position);
  const double low = std::max(std::floor(correction_dim(rs.beta_fast, dim, base, orig)), 0.0);
  const double high = std::min(std::ceil(correction_dim(rs.beta_slow, dim, base, orig)),
                               static_cast<double>(dim - 1));
  // The official ramp's divisor (precompute_freqs_cis): max(high - low, 1e-3).
  const double span = std::max(high - low, 1e-3);
  const float factor = static_cast<float>(rs.factor);
  for (int64_t i = 0; i < half; ++i) {
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(span), 0.0f, 1.0f);
    const float smooth = 1.0f - ramp;
    freq[i] = freq[i] / factor * (1.0f - smooth) + freq[i] * smooth;
  }
  return freq;
}

}  // namespace flashdesk
