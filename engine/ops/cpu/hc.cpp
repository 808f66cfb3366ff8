// Manifold-constrained hyper-connections on the CPU reference backend (docs/model-spec.md §4.1):
// the per-token mixes with Sinkhorn normalisation, collapse of the streams, expansion.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"

namespace flashdesk {

void CpuReferenceBackend::hc_mixes(const Tensor& X, const HcParams& p, const HcSettings& s,
                                   Tensor& pre, Tensor& post, Tensor& comb) {
  const int64_t n = X.rows(), hc = s.hc, flat = X.shape().row_numel();
  const int64_t n_mix = (2 + hc) * hc;
  check_hc_mix_args(X, p, s, pre, post, comb);
  const float* fn = p.fn.data<float>();
  const float* base = p.base.data<float>();
  const float* sc = p.scale.data<float>();
  pool_->parallel_for(n, cpu::rows_per_task(n_mix * flat), [&](int64_t begin, int64_t end) {
    std::vector<float> m(static_cast<size_t>(n_mix));
    for (int64_t i = begin; i < end; ++i) {
      const float* x = X.data<float>() + i * flat;
      const float r =
          1.0f / std::sqrt(cpu::dot(x, x, flat) / static_cast<float>(flat) + s.norm_eps);
      for (int64_t j = 0; j < n_mix; ++j) m[j] = cpu::dot(x, fn + j * flat, flat) * r;
      float* pr = pre.data<float>() + i * hc;
      float* po = post.data<float>() + i * hc;
      float* c = comb.data<float>() + i * hc * hc;
      for (int64_t j = 0; j < hc; ++j) {
        pr[j] = cpu::sigmoid(m[j] * sc[0] + base[j]) + s.hc_eps;
        po[j] = 2.0f * cpu::sigmoid(m[hc + j] * sc[1] + base[hc + j]);
      }
      for (int64_t j = 0; j < hc * hc; ++j) c[j] = m[2 * hc + j] * sc[2] + base[2 * hc + j];
      cpu::sinkhorn(c, hc, s.sinkhorn_iters, s.hc_eps);
    }
  });
}

void CpuReferenceBackend::hc_collapse(const Tensor& X, const Tensor& pre, Tensor& u) {
  const int64_t n = X.rows(), hc = pre.dim(1), d = X.shape().row_numel() / hc;
  check_shape(u, Shape{n, d}, "hc_collapse out");
  FD_CHECK(pre.rows() == n, "hc_collapse: pre rows");
  for (int64_t i = 0; i < n; ++i) {
    const float* x = X.data<float>() + i * hc * d;
    const float* pr = pre.data<float>() + i * hc;
    float* o = u.data<float>() + i * d;
    for (int64_t e = 0; e < d; ++e) {
      float acc = 0.0f;
      for (int64_t j = 0; j < hc; ++j) acc += pr[j] * x[j * d + e];
      o[e] = flashdesk::round_bf16(acc);
    }
  }
}

void CpuReferenceBackend::hc_expand(const Tensor& X, const Tensor& y, const Tensor& post,
                                    const Tensor& comb, Tensor& out) {
  const int64_t n = X.rows(), hc = post.dim(1), d = X.shape().row_numel() / hc;
  check_shape(y, Shape{n, d}, "hc_expand y");
  check_shape(comb, Shape{n, hc, hc}, "hc_expand comb");
  FD_CHECK(out.numel() == X.numel() && out.bytes() != X.bytes(), "hc_expand: out must not alias X");
  for (int64_t i = 0; i < n; ++i) {
    const float* x = X.data<float>() + i * hc * d;
    const float* yy = y.data<float>() + i * d;
    const float* po = post.data<float>() + i * hc;
    const float* c = comb.data<float>() + i * hc * hc;
    float* o = out.data<float>() + i * hc * d;
    for (int64_t k = 0; k < hc; ++k)
      for (int64_t e = 0; e < d; ++e) {
        float acc = 0.0f;
        for (int64_t j = 0; j < hc; ++j) acc += c[j * hc + k] * x[j * d + e];
        o[k * d + e] = flashdesk::round_bf16(po[k] * yy[e] + acc);
      }
  }
}

}  // namespace flashdesk
