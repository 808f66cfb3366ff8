// The kernel table of the optimised CPU backend: one set of function pointers per instruction
// set (portable scalar, AVX2, AVX-512), chosen once when the backend is made (cpu_isa.h). The
// backend's ops (opt_*.cpp) are written once against this table; only the kernels differ per ISA.
//
// Numerics contract (docs/numerics.md, docs/cpu-optimized.md): every kernel rounds where the
// reference does and sums in the reference's order (dot products: 8 lanes of multiply-then-add
// over K, then cpu::dot's lane tree; no FMA), so every ISA gives the reference backend's bits.
#pragma once

#include <cstdint>

#include "engine/ops/cpu_opt/cpu_isa.h"
#include "engine/ops/kv_format.h"
#include "engine/ops/weights.h"

namespace flashdesk::cpu_opt {

// x stride for `k` columns: rows are padded with zeros to a multiple of 8 floats, so vector
// kernels never read past a row or need a tail for x.
constexpr int64_t padded_cols(int64_t k) {
  return (k + 7) / 8 * 8;
}

// y[i * y_stride + o] = sum_k x[i * x_stride + k] * W[o, k] for tokens i < n and weight rows o
// of the range a kernel call is given (rows of W index the columns of y directly, so a grouped
// linear passes each group's rows). x holds the prepared input (act-quantised or as is) and
// zeros in columns [k, x_stride) when k is not a multiple of 8. FP8 and FP4 weights sum as the
// official GEMM does (cpu::blocked_dot: a partial per K-block of 32, partials added in K order);
// BF16 and F32 weights in one chain over K (cpu::dot).
//
// Every output is computed by one call in a fixed order that depends neither on n, nor on the
// row range, nor on the thread: so decode (n = 1) and prefill (n > 1) give the same bits.
struct LinearJob {
  const float* x = nullptr;
  int64_t n = 0;
  int64_t x_stride = 0;
  const LinearWeight* w = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
  bool round_bf16 = true;
  // One chain over K whatever the weight's format (a BF16 einsum's order: wo_a, whose FP8 tensor
  // the official code dequantises to BF16), rather than FP8 / FP4's sums by K-block of 32.
  bool one_chain = false;
};

struct Kernels {
  CpuIsa isa = CpuIsa::Scalar;

  // act_quant of one row of k values (FP8 E4M3 per 32, UE8M0 scale), written dequantised:
  // bit-identical to the reference quantiser. out may equal x.
  void (*act_quant_row)(const float* x, int64_t k, float* out);
  // Outputs of weight rows [o_begin, o_end) for every token of the job.
  void (*linear_rows)(const LinearJob& job, int64_t o_begin, int64_t o_end);

  // FP32 dot product in cpu::dot's order.
  float (*dot)(const float* a, const float* b, int64_t n);
  // x = bf16(x), in place.
  void (*round_bf16)(float* x, int64_t n);
  // out = bf16(x / d): the attention's normalisation (a true division, as the reference).
  void (*divide_round_bf16)(const float* x, float d, int64_t n, float* out);

  // y = bf16(w * (x * r)) (w null: bf16(x * r)), r = 1/sqrt(mean(x^2) + eps).
  void (*rms_norm_row)(const float* x, const float* w, float eps, int64_t d, float* y);
  // One head's rope dims in place: pairs (v[2i], v[2i+1]) rotated by (cos[i], sin[i]), bf16.
  void (*rope_pairs)(float* v, const float* cos, const float* sin, int64_t pairs);
  // u[e] = bf16(sum_j pre[j] * x[j*d + e]) (j ascending, from 0).
  void (*hc_collapse_row)(const float* x, const float* pre, int64_t hc, int64_t d, float* u);
  // out[k*d + e] = bf16(post[k] * y[e] + sum_j comb[j*hc + k] * x[j*d + e]).
  void (*hc_expand_row)(const float* x, const float* y, const float* post, const float* comb,
                        int64_t hc, int64_t d, float* out);

  // Attention logits of `heads` query rows (q [heads, d]) against nk keys (rows of d floats):
  // logits[h * nk + i] = (q_h . key_i) * scale.
  void (*qk_logits)(const float* q, int64_t heads, const float* const* keys, int64_t nk, int64_t d,
                    float scale, float* logits);
  // acc[h * d + e] += p[h * nk + i] * key_i[e] for keys i in order (the reference's sequence).
  void (*pv_accumulate)(const float* p, int64_t heads, const float* const* keys, int64_t nk,
                        int64_t d, float* acc);

  // One cache row (kv_format.h layout) to `dim` FP32 values (exact).
  void (*dequantize_kv_row)(KvFormat f, const uint8_t* row, int64_t dim, float* out);
  // Indexer score of m entries in the official BF16 arithmetic: score[s] = bf16(sum over h
  // ascending of bf16(max(0, bf16(dots[h * stride + s])) * w[h])) (cpu::index_head_term).
  void (*relu_weighted_sum)(const float* dots, int64_t stride, const float* w, int64_t heads,
                            int64_t m, float* score);
};

// Fails (FD_CHECK) naming a weight whose block layout the SIMD kernels do not handle (FP8 tiles
// or FP4 blocks other than 32). Defined in a baseline file: *_avx2.cpp files build no strings.
[[noreturn]] void unsupported_weight(const LinearWeight& w);

// The table for `isa` (which the caller has checked is supported).
const Kernels& kernels_for(CpuIsa isa);

// Per-ISA tables, defined in kernels_scalar.cpp, kernels_avx2.cpp and kernels_avx512.cpp.
const Kernels& scalar_kernels();
const Kernels* avx2_kernels();
const Kernels* avx512_kernels();

}  // namespace flashdesk::cpu_opt
