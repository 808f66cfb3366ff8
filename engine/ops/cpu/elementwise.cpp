// Row-wise ops of the CPU reference backend: RMSNorm, interleaved partial RoPE, scaling, BF16
// rounding, FP4 fake-quant of index queries, embedding lookup.
#include <cmath>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"
#include "engine/util/quant.h"

namespace flashdesk {

void CpuReferenceBackend::rms_norm(const Tensor& x, const Tensor* weight, float eps, Tensor& y) {
  const int last = x.shape().rank() - 1;
  const int64_t d = x.dim(last), n = x.numel() / d;
  FD_CHECK(y.numel() == x.numel(), "rms_norm: output " + y.shape().str());
  if (weight) check_shape(*weight, Shape{d}, "rms_norm weight");
  const float* xd = x.data<float>();
  const float* w = weight ? weight->data<float>() : nullptr;
  float* yd = y.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = xd + i * d;
    const float r = 1.0f / std::sqrt(cpu::dot(row, row, d) / static_cast<float>(d) + eps);
    for (int64_t j = 0; j < d; ++j) {
      const float v = row[j] * r;
      yd[i * d + j] = flashdesk::round_bf16(w ? w[j] * v : v);
    }
  }
}

void CpuReferenceBackend::rope(Tensor& x, int64_t head_dim, std::span<const int64_t> positions,
                               std::span<const float> inv_freq, bool inverse) {
  const int64_t n = x.rows(), row = x.shape().row_numel();
  const int64_t rope_dim = static_cast<int64_t>(inv_freq.size()) * 2;
  FD_CHECK(row % head_dim == 0 && rope_dim <= head_dim, "rope: shape " + x.shape().str());
  FD_CHECK(static_cast<int64_t>(positions.size()) == n, "rope: one position per row");
  const int64_t heads = row / head_dim;
  float* xd = x.data<float>();
  std::vector<float> cs(inv_freq.size()), sn(inv_freq.size());
  for (int64_t i = 0; i < n; ++i) {
    const float pos = static_cast<float>(positions[static_cast<size_t>(i)]);
    for (size_t p = 0; p < inv_freq.size(); ++p) {
      const float angle = pos * inv_freq[p];
      cs[p] = std::cos(angle);
      sn[p] = inverse ? -std::sin(angle) : std::sin(angle);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = xd + i * row + h * head_dim + (head_dim - rope_dim);
      for (size_t p = 0; p < inv_freq.size(); ++p) {
        const float a = v[2 * p], b = v[2 * p + 1];
        v[2 * p] = flashdesk::round_bf16(a * cs[p] - b * sn[p]);
        v[2 * p + 1] = flashdesk::round_bf16(a * sn[p] + b * cs[p]);
      }
    }
  }
}

void CpuReferenceBackend::scale(Tensor& x, float factor) {
  float* d = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] *= factor;
}

void CpuReferenceBackend::round_bf16(Tensor& x) {
  float* d = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = flashdesk::round_bf16(d[i]);
}

void CpuReferenceBackend::fake_quant_fp4_e8m0(Tensor& x, int64_t block) {
  const int64_t d = x.dim(x.shape().rank() - 1);
  FD_CHECK(d % block == 0 && block % 2 == 0, "fake_quant_fp4_e8m0: row not a multiple of block");
  float* xd = x.data<float>();
  for (int64_t i = 0; i < x.numel(); i += d)
    flashdesk::fake_quant_fp4_e8m0(xd + i, static_cast<size_t>(d), static_cast<size_t>(block));
}

void CpuReferenceBackend::embed(const Tensor& table, std::span<const int32_t> ids, Tensor& rows,
                                Tensor& X) {
  check_dtype(table, DType::BF16, "embed table");
  const int64_t vocab = table.dim(0), d = table.dim(1), n = static_cast<int64_t>(ids.size());
  check_shape(rows, Shape{n, d}, "embed rows");
  FD_CHECK(X.rows() == n && X.shape().row_numel() % d == 0, "embed: streams " + X.shape().str());
  const int64_t hc = X.shape().row_numel() / d;
  const uint8_t* t = table.bytes();
  float* r = rows.data<float>();
  float* xd = X.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[static_cast<size_t>(i)];
    FD_CHECK(id >= 0 && id < vocab, "embed: token id out of range");
    for (int64_t j = 0; j < d; ++j) r[i * d + j] = cpu::load_bf16(t + 2 * (id * d + j));
    for (int64_t k = 0; k < hc; ++k)
      std::memcpy(xd + (i * hc + k) * d, r + i * d, static_cast<size_t>(d) * sizeof(float));
  }
}

}  // namespace flashdesk
