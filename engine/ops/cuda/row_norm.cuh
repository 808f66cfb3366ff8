// RMSNorm of a row by one block with each thread's values loaded at once and held: the body of
// rms_norm's decode kernel (elementwise.cu), shared with kernels that norm a row before more work
// on it (rope_quantize_rows, kv_quant.cu), so that both give the same bits: the same threads,
// the same sums in the same order.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/ops/cuda/kernel_util.cuh"

namespace flashdesk::cuda {

// Values a thread holds (rows of at most kNormHeld * blockDim.x values).
constexpr int kNormHeld = 8;

// The threads rms_norm gives a row of d values when the rows are fewer than the multiprocessors
// (a decode step): about four values a thread, so the row's loads are in flight at once instead
// of 20 after each other (10 µs a call at d = 5120 with 256 threads).
inline int64_t decode_norm_threads(int64_t d) {
  return std::clamp<int64_t>((d / 4 + 31) / 32 * 32, 32, 1024);
}

// out[j] = bf16(w[j] * (row[j] * r)) (no w: bf16(row[j] * r)), r = 1 / sqrt(mean(row^2) + eps),
// for d <= kNormHeld * blockDim.x; out may be row. Every thread of the block calls it (a block
// sum over `scratch`, 32 floats of shared memory).
__device__ inline void rms_norm_held_row(const float* row, const float* w, float eps, int64_t d,
                                         float* scratch, float* out) {
  float v[kNormHeld], wv[kNormHeld];
  FD_UNROLL
  for (int u = 0; u < kNormHeld; ++u) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    v[u] = j < d ? row[j] : 0.0f;
    wv[u] = w && j < d ? w[j] : 0.0f;
  }
  float ss = 0.0f;
  FD_UNROLL
  for (int u = 0; u < kNormHeld; ++u)
    if (threadIdx.x + static_cast<int64_t>(u) * blockDim.x < d) ss += v[u] * v[u];
  const float r = 1.0f / sqrtf(block_sum(ss, scratch) / static_cast<float>(d) + eps);
  FD_UNROLL
  for (int u = 0; u < kNormHeld; ++u) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (j >= d) continue;
    const float nv = __fmul_rn(v[u], r);
    out[j] = round_bf16(w ? __fmul_rn(wv[u], nv) : nv);
  }
}

}  // namespace flashdesk::cuda
