// mHC on the optimised CPU backend: the mixes' [n, hc*D] x [(2+hc)*hc, hc*D]^T product runs as
// an FP32 linear on the ISA's kernel; the per-token sigmoid / Sinkhorn tail is the reference's
// scalar arithmetic in the reference's order; collapse and expansion are vectorised with the
// reference's exact rounding.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/ops/cpu/kernels.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"

namespace flashdesk {
namespace {

// pre / post / comb of one token from its raw mixes m (already times the RMS factor).
void split_mixes(const float* m, const float* base, const float* sc, const HcSettings& s,
                 float* pre, float* post, float* comb) {
  const int64_t hc = s.hc;
  for (int64_t j = 0; j < hc; ++j) {
    pre[j] = cpu::sigmoid(m[j] * sc[0] + base[j]) + s.hc_eps;
    post[j] = 2.0f * cpu::sigmoid(m[hc + j] * sc[1] + base[hc + j]);
  }
  for (int64_t j = 0; j < hc * hc; ++j) comb[j] = m[2 * hc + j] * sc[2] + base[2 * hc + j];
  cpu::sinkhorn(comb, hc, s.sinkhorn_iters, s.hc_eps);
}

}  // namespace

void CpuOptimizedBackend::hc_mixes(const Tensor& X, const HcParams& p, const HcSettings& s,
                                   Tensor& pre, Tensor& post, Tensor& comb) {
  const int64_t n = X.rows(), hc = s.hc, flat = X.shape().row_numel();
  const int64_t n_mix = (2 + hc) * hc;
  check_hc_mix_args(X, p, s, pre, post, comb);
  // m = X . fn^T, FP32 output, no rounding; X rows padded only when flat is not a multiple of 8.
  const LinearWeight fn{WeightFormat::F32, n_mix, flat, 32, p.fn, Tensor(), "hc fn"};
  const float* xd = X.data<float>();
  std::vector<float> padded;
  int64_t xs = flat;
  if (flat % 8 != 0) {
    xs = cpu_opt::padded_cols(flat);
    padded.assign(static_cast<size_t>(n * xs), 0.0f);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(&padded[i * xs], xd + i * flat, static_cast<size_t>(flat) * sizeof(float));
  }
  std::vector<float> m(static_cast<size_t>(n * n_mix));
  const cpu_opt::LinearJob job{
      padded.empty() ? xd : padded.data(), n, xs, &fn, m.data(), n_mix, false};
  std::vector<LinearTask> tasks;
  add_linear_tasks(job, 0, n_mix, tasks);
  run_linear_tasks(tasks);
  parallel_units(n, flat + 64 * hc * hc * s.sinkhorn_iters, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* x = xd + i * flat;
      const float r =
          1.0f / std::sqrt(kernels().dot(x, x, flat) / static_cast<float>(flat) + s.norm_eps);
      float* mi = &m[i * n_mix];
      for (int64_t j = 0; j < n_mix; ++j) mi[j] *= r;
      split_mixes(mi, p.base.data<float>(), p.scale.data<float>(), s, pre.data<float>() + i * hc,
                  post.data<float>() + i * hc, comb.data<float>() + i * hc * hc);
    }
  });
}

void CpuOptimizedBackend::hc_collapse(const Tensor& X, const Tensor& pre, Tensor& u) {
  const int64_t n = X.rows(), hc = pre.dim(1), d = X.shape().row_numel() / hc;
  check_shape(u, Shape{n, d}, "hc_collapse out");
  FD_CHECK(pre.rows() == n, "hc_collapse: pre rows");
  const float* xd = X.data<float>();
  const float* pr = pre.data<float>();
  float* ud = u.data<float>();
  parallel_units(n, hc * d, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      kernels().hc_collapse_row(xd + i * hc * d, pr + i * hc, hc, d, ud + i * d);
  });
}

void CpuOptimizedBackend::hc_expand(const Tensor& X, const Tensor& y, const Tensor& post,
                                    const Tensor& comb, Tensor& out) {
  const int64_t n = X.rows(), hc = post.dim(1), d = X.shape().row_numel() / hc;
  check_shape(y, Shape{n, d}, "hc_expand y");
  check_shape(comb, Shape{n, hc, hc}, "hc_expand comb");
  FD_CHECK(out.numel() == X.numel() && out.bytes() != X.bytes(), "hc_expand: out must not alias X");
  const float* xd = X.data<float>();
  float* od = out.data<float>();
  parallel_units(n, hc * hc * d, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      kernels().hc_expand_row(xd + i * hc * d, y.data<float>() + i * d, post.data<float>() + i * hc,
                              comb.data<float>() + i * hc * hc, hc, d, od + i * hc * d);
  });
}

}  // namespace flashdesk
