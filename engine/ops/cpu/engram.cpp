// Engram on the CPU reference backend (docs/model-spec.md §7, docs/numerics.md "Engram"): gather of
// FP8 table rows and the per-stream sigmoid gate that adds the value to the hc streams.
#include <cmath>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"

namespace flashdesk {

void CpuReferenceBackend::engram_gather(const QuantTable& table, std::span<const int64_t> ids,
                                        Tensor& e) {
  check_engram_gather_args(table, ids, e);
  const int64_t n = e.rows(), width = table.width(), rows = table.rows();
  const int64_t cols = e.dim(1) / width;
  const uint8_t* codes = table.codes.bytes();
  const uint8_t* scales = table.scales.bytes();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t r = ids[static_cast<size_t>(i * cols + c)];
      FD_CHECK(r >= 0 && r < rows, "engram: row id out of range");
      float* o = e.data<float>() + (i * cols + c) * width;
      for (int64_t j = 0; j < width; ++j)
        o[j] = e4m3_to_f32(codes[r * width + j]) * e8m0_to_f32(scales[r * (width / 32) + j / 32]);
    }
}

void CpuReferenceBackend::engram_update(Tensor& X, const Tensor& kv, const Tensor& q_weight,
                                        const Tensor& k_weight,
                                        std::span<const uint8_t> masked_rows, float eps) {
  const int64_t n = X.rows(), hc = q_weight.dim(0), d = q_weight.dim(1);
  check_shape(X, Shape{n, hc, d}, "engram streams");
  check_shape(kv, Shape{n, (hc + 1) * d}, "engram kv");
  check_shape(k_weight, q_weight.shape(), "engram k_weight");
  const float inv_sqrt_d = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float* qw = q_weight.data<float>();
  const float* kw = k_weight.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const bool masked = !masked_rows.empty() && masked_rows[static_cast<size_t>(i)];
    const float* value = kv.data<float>() + i * (hc + 1) * d + hc * d;
    for (int64_t k = 0; k < hc; ++k) {
      float* x = X.data<float>() + (i * hc + k) * d;
      const float* key = kv.data<float>() + i * (hc + 1) * d + k * d;
      // The three sums correctly rounded (FP64, rounded once), as the oracle's: one ulp of the
      // gate moves a stream value across a BF16 boundary, and that value reaches the window's
      // FP8 keys and every later query's attention (docs/numerics.md "Engram").
      double dot_sum = 0, xx = 0, kk = 0;
      for (int64_t j = 0; j < d; ++j) {
        dot_sum += static_cast<double>(x[j] * (qw[k * d + j] * kw[k * d + j]) * key[j]);
        xx += static_cast<double>(x[j] * x[j]);
        kk += static_cast<double>(key[j] * key[j]);
      }
      const float rx = 1.0f / std::sqrt(static_cast<float>(xx / static_cast<double>(d)) + eps);
      const float rk = 1.0f / std::sqrt(static_cast<float>(kk / static_cast<double>(d)) + eps);
      float dot = static_cast<float>(dot_sum) * rx * rk * inv_sqrt_d;
      const float mag = std::sqrt(std::max(std::fabs(dot), 1e-6f));
      const float gate = masked ? 0.0f : cpu::sigmoid(dot < 0 ? -mag : (dot > 0 ? mag : 0.0f));
      for (int64_t j = 0; j < d; ++j) x[j] = flashdesk::round_bf16(x[j] + gate * value[j]);
    }
  }
}

}  // namespace flashdesk
