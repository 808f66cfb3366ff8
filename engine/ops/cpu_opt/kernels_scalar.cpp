// The portable kernel set of the optimised CPU backend: plain C++ in the reference kernels'
// summation order (so on a CPU without AVX2 the optimised backend gives the reference's bits and
// keeps only its own threading and batching), plus the ISA switch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/ops/cpu/kernels.h"
#include "engine/ops/cpu_opt/opt_kernels.h"
#include "engine/util/error.h"
#include "engine/util/numeric.h"

namespace flashdesk::cpu_opt {
namespace {

void act_quant_row(const float* x, int64_t k, float* out) {
  cpu::act_quant_row(x, k, out);
}

// The reference's linear order: one weight row dequantised, one cpu::dot per token.
void linear_rows(const LinearJob& j, int64_t o_begin, int64_t o_end) {
  const int64_t k = j.w->in;
  std::vector<float> wrow(static_cast<size_t>(k));
  const bool blocked = cpu::accumulates_by_block(*j.w) && !j.one_chain;
  for (int64_t o = o_begin; o < o_end; ++o) {
    cpu::dequantize_weight_row(*j.w, o, wrow.data());
    for (int64_t i = 0; i < j.n; ++i) {
      const float v = blocked ? cpu::blocked_dot(j.x + i * j.x_stride, wrow.data(), k)
                              : cpu::dot(j.x + i * j.x_stride, wrow.data(), k);
      j.y[i * j.y_stride + o] = j.round_bf16 ? flashdesk::round_bf16(v) : v;
    }
  }
}

float dot(const float* a, const float* b, int64_t n) {
  return cpu::dot(a, b, n);
}

void round_bf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = flashdesk::round_bf16(x[i]);
}

void divide_round_bf16(const float* x, float d, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = flashdesk::round_bf16(x[i] / d);
}

void rms_norm_row(const float* x, const float* w, float eps, int64_t d, float* y) {
  const float r = 1.0f / std::sqrt(cpu::dot(x, x, d) / static_cast<float>(d) + eps);
  for (int64_t j = 0; j < d; ++j) {
    const float v = x[j] * r;
    y[j] = flashdesk::round_bf16(w ? w[j] * v : v);
  }
}

void rope_pairs(float* v, const float* cos, const float* sin, int64_t pairs) {
  for (int64_t p = 0; p < pairs; ++p) {
    const float a = v[2 * p], b = v[2 * p + 1];
    v[2 * p] = flashdesk::round_bf16(a * cos[p] - b * sin[p]);
    v[2 * p + 1] = flashdesk::round_bf16(a * sin[p] + b * cos[p]);
  }
}

void hc_collapse_row(const float* x, const float* pre, int64_t hc, int64_t d, float* u) {
  for (int64_t e = 0; e < d; ++e) {
    float acc = 0.0f;
    for (int64_t j = 0; j < hc; ++j) acc += pre[j] * x[j * d + e];
    u[e] = flashdesk::round_bf16(acc);
  }
}

void hc_expand_row(const float* x, const float* y, const float* post, const float* comb, int64_t hc,
                   int64_t d, float* out) {
  for (int64_t k = 0; k < hc; ++k)
    for (int64_t e = 0; e < d; ++e) {
      float acc = 0.0f;
      for (int64_t j = 0; j < hc; ++j) acc += comb[j * hc + k] * x[j * d + e];
      out[k * d + e] = flashdesk::round_bf16(post[k] * y[e] + acc);
    }
}

void qk_logits(const float* q, int64_t heads, const float* const* keys, int64_t nk, int64_t d,
               float scale, float* logits) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < nk; ++i) logits[h * nk + i] = cpu::dot(q + h * d, keys[i], d) * scale;
}

void pv_accumulate(const float* p, int64_t heads, const float* const* keys, int64_t nk, int64_t d,
                   float* acc) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < nk; ++i)
      for (int64_t e = 0; e < d; ++e) acc[h * d + e] += p[h * nk + i] * keys[i][e];
}

void dequantize_kv_row(KvFormat f, const uint8_t* row, int64_t dim, float* out) {
  cpu::dequantize_kv_row(f, row, dim, out);
}

void relu_weighted_sum(const float* dots, int64_t stride, const float* w, int64_t heads, int64_t m,
                       float* score) {
  for (int64_t s = 0; s < m; ++s) {
    float acc = 0.0f;
    for (int64_t h = 0; h < heads; ++h) acc += cpu::index_head_term(dots[h * stride + s], w[h]);
    score[s] = flashdesk::round_bf16(acc);
  }
}

}  // namespace

void unsupported_weight(const LinearWeight& w) {
  FD_CHECK(false, w.name + ": the optimised kernels need 32-wide FP8 tiles and FP4 blocks");
  __builtin_unreachable();
}

const Kernels& scalar_kernels() {
  static const Kernels k{CpuIsa::Scalar,    act_quant_row,     linear_rows,  dot,
                         round_bf16,        divide_round_bf16, rms_norm_row, rope_pairs,
                         hc_collapse_row,   hc_expand_row,     qk_logits,    pv_accumulate,
                         dequantize_kv_row, relu_weighted_sum};
  return k;
}

const Kernels& kernels_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar:
      return scalar_kernels();
    case CpuIsa::Avx2: {
      const Kernels* k = avx2_kernels();
      FD_CHECK(k != nullptr && cpu_isa_supported(isa), "AVX2 kernels are not available");
      return *k;
    }
    case CpuIsa::Avx512: {
      FD_CHECK(cpu_isa_supported(isa), "AVX-512 kernels are not available");
      return *avx512_kernels();
    }
  }
  FD_CHECK(false, "unknown CPU ISA");
  return scalar_kernels();
}

}  // namespace flashdesk::cpu_opt
