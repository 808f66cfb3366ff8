// Small scalar building blocks shared by the CPU ops of both backends: dot products, weight-row
// dequantisation, the activation quantiser applied to a row, Sinkhorn, top-k selection.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "engine/ops/kv_format.h"
#include "engine/ops/weights.h"
#include "engine/util/numeric.h"

namespace flashdesk::cpu {

// FP32 dot product with eight interleaved partial sums (a fixed order that compilers vectorise
// without reassociation), combined pairwise at the end.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) acc[i & 7] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// FP32 dot of the official quantised GEMM: a partial per K-block of 32 (cpu::dot's order), the
// partials added in K order (docs/numerics.md "Linear layers").
float blocked_dot(const float* x, const float* w, int64_t k);

// Whether a linear with this weight accumulates by K-block (the FP8 and FP4 formats, whose
// official GEMM does) or in one dot over K (BF16 / F32 weights).
inline bool accumulates_by_block(const LinearWeight& w) {
  return w.format == WeightFormat::Fp8Block || w.format == WeightFormat::Fp4Row;
}

// Rows per thread task so that a task holds at least ~64K multiply-adds: smaller ops run on the
// calling thread, where waking the pool would cost more than the work.
inline int64_t rows_per_task(int64_t work_per_row) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, work_per_row));
}

inline float load_bf16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bf16_to_f32(h);
}

// Row `row` of a linear weight as FP32 values [w.in] (exact: every stored format widens exactly).
void dequantize_weight_row(const LinearWeight& w, int64_t row, float* out);

// The reference act_quant applied to one row: per block of 32 along the row, FP8 E4M3 with a
// UE8M0 scale, returned dequantised (docs/numerics.md "Quantisers").
void act_quant_row(const float* x, int64_t n, float* out);

// One cache row (kv_format.h layout) quantised from / dequantised to `dim` FP32 values.
void quantize_kv_row(KvFormat f, const float* x, int64_t dim, uint8_t* row);
void dequantize_kv_row(KvFormat f, const uint8_t* row, int64_t dim, float* out);

// Sinkhorn on one hc x hc mHC matrix c (row j, column k), in place, FP32, in the order of
// docs/model-spec.md §4.1: row softmax + eps, column normalisation, then (iters - 1) row / column
// rounds.
void sinkhorn(float* c, int64_t hc, int64_t iters, float eps);

// Writes the `out.size()` best of `score` (ties broken as torch's CPU topk breaks them) in
// ascending index order into out; indices >= limit (or missing) become -1. Keeps entries scoring
// -inf, like the reference's topk; `drop_neg_inf` drops them instead (candidate blocks).
void select_best(const std::vector<float>& score, int64_t limit, bool drop_neg_inf,
                 std::span<int32_t> out);

// One head's term of an index score in the official BF16 arithmetic: the head's dot product
// rounded to bf16, ReLU, times the head weight (bf16), rounded to bf16 (docs/numerics.md).
inline float index_head_term(float dot, float weight) {
  return round_bf16(std::max(0.0f, round_bf16(dot)) * weight);
}

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

}  // namespace flashdesk::cpu
