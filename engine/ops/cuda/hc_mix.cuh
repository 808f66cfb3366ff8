// The mHC mixes' shared parts on the CUDA backend: the shapes, the Sinkhorn and the end of a mix
// kernel's block that combines a row tile's split sums (hc.cu's kernel on the CUDA cores for a
// few rows, hc_mix_tc.cu's on the tensor cores for a prefill's).
#pragma once

#include <cstdint>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/no_padding.h"

namespace flashdesk::cuda {

constexpr int kMaxHc = 4;
constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;  // 24 mixes
constexpr int kSums = kMaxMix + 1;              // + the sum of squares
FD_NO_PADDING_BEGIN
struct MixShape {
  int64_t n, flat, hc, n_mix, splits, tile_rows;
  int64_t split_len;  // flat elements a split (the tensor-core kernel's; hc.cu's is fixed)
  float norm_eps, hc_eps;
  int64_t iters;
};
FD_NO_PADDING_END
template <>
inline constexpr bool kNoPaddingDeclared<MixShape> = true;  // its floats

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// Sinkhorn of MODEL-REFERENCE §4.1 on one HC x HC matrix, spread over the lanes of a warp: lane
// j * HC + k holds element (j, k) and gathers its row or column with shuffles, summing it in the
// CPU reference's order (k, or j, ascending), so every value is the reference's to the bit. One
// thread running the 20 rounds alone (its 640 divisions in a chain) took most of a decode step's
// 45 µs mix on the H200. Every lane of the warp calls this; lanes past HC * HC compute garbage.
template <int HC>
__device__ float sinkhorn_lane(float v, int64_t iters, float eps, unsigned lane) {
  const int j = static_cast<int>(lane) / HC, k = static_cast<int>(lane) % HC;
  auto row_sum = [&](float x) {
    float sum = 0.0f;
    FD_UNROLL
    for (int kk = 0; kk < HC; ++kk) sum += __shfl_sync(kFullMask, x, j * HC + kk);
    return sum;
  };
  auto col_sum = [&](float x) {
    float sum = 0.0f;
    FD_UNROLL
    for (int jj = 0; jj < HC; ++jj) sum += __shfl_sync(kFullMask, x, jj * HC + k);
    return sum;
  };
  float mx = v;
  FD_UNROLL
  for (int kk = 0; kk < HC; ++kk) mx = fmaxf(mx, __shfl_sync(kFullMask, v, j * HC + kk));
  v = expf(v - mx);
  v = v / row_sum(v) + eps;
  v /= col_sum(v) + eps;
  for (int64_t it = 1; it < iters; ++it) {
    v /= row_sum(v) + eps;
    v /= col_sum(v) + eps;
  }
  return v;
}

// comb of one row by one warp: the HC x HC logits from the mixes m (scaled by r), Sinkhorn, stored.
template <int HC>
__device__ void comb_of_row(const float* m, float r, const float* scale, const float* base,
                            int64_t iters, float eps, unsigned lane, float* out) {
  const int e = static_cast<int>(lane) < HC * HC ? static_cast<int>(lane) : 0;
  float c = __fadd_rn(__fmul_rn(m[2 * HC + e] * r, scale[2]), base[2 * HC + e]);
  c = sinkhorn_lane<HC>(c, iters, eps, lane);
  if (static_cast<int>(lane) < HC * HC) out[lane] = c;
}

// The end of a mix kernel's block once it has written its partial sums (partial[row][split]
// [kSums]) of row tile `tile`: the last block of the tile to arrive (done[tile], set back to zero
// for the next kernel: arrival_counters) combines the splits in order, one thread per (row, sum),
// and a warp per row runs the Sinkhorn. row_sums: shared memory for the tile's rows; is_last: a
// shared flag. Every thread of the block calls it.
__device__ __forceinline__ void finish_mix_tile(const MixShape& s, int64_t tile,
                                                const float* partial, unsigned* done,
                                                const float* base, const float* scale,
                                                float (*row_sums)[kSums], unsigned* is_last,
                                                float* pre, float* post, float* comb) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  __threadfence();
  if (threadIdx.x == 0) {
    *is_last = atomicAdd(&done[tile], 1u) == s.splits - 1;
    if (*is_last) done[tile] = 0;  // zero again for the next kernel (arrival_counters)
  }
  __syncthreads();
  if (!*is_last) return;
  __threadfence();
  // Combine the splits in order, one thread per (row, sum); the loads of eight splits are issued
  // together (one at a time, 40 L2 round trips were several µs of a decode step).
  for (int64_t i = threadIdx.x; i < s.tile_rows * kSums; i += blockDim.x) {
    const int64_t r = i / kSums, j = i % kSums;
    const int64_t row = tile * s.tile_rows + r;
    float v = 0.0f;
    if (row < s.n) {
      const float* src = partial + row * s.splits * kSums + j;
      for (int64_t sp0 = 0; sp0 < s.splits; sp0 += 8) {
        float t[8];
        FD_UNROLL
        for (int u = 0; u < 8; ++u)
          t[u] = sp0 + u < s.splits ? __ldcg(src + (sp0 + u) * kSums) : 0.0f;
        FD_UNROLL
        for (int u = 0; u < 8; ++u)
          if (sp0 + u < s.splits) v += t[u];
      }
    }
    row_sums[r][j] = v;
  }
  __syncthreads();
  // A warp per row of the tile (the Sinkhorn's lanes).
  for (int64_t r = warp; r < s.tile_rows; r += blockDim.x / 32) {
    const int64_t row = tile * s.tile_rows + r;
    if (row >= s.n) return;  // uniform over the warp
    const float* m = row_sums[r];
    const float rs = 1.0f / sqrtf(m[kMaxMix] / static_cast<float>(s.flat) + s.norm_eps);
    const int64_t hc = s.hc;
    if (lane < hc) {
      pre[row * hc + lane] =
          sigmoid(__fadd_rn(__fmul_rn(m[lane] * rs, scale[0]), base[lane])) + s.hc_eps;
      post[row * hc + lane] =
          2.0f * sigmoid(__fadd_rn(__fmul_rn(m[hc + lane] * rs, scale[1]), base[hc + lane]));
    }
    float* out = comb + row * hc * hc;
    switch (hc) {  // hc <= kMaxHc, checked by the caller
      case 1:
        comb_of_row<1>(m, rs, scale, base, s.iters, s.hc_eps, lane, out);
        break;
      case 2:
        comb_of_row<2>(m, rs, scale, base, s.iters, s.hc_eps, lane, out);
        break;
      case 3:
        comb_of_row<3>(m, rs, scale, base, s.iters, s.hc_eps, lane, out);
        break;
      default:
        comb_of_row<4>(m, rs, scale, base, s.iters, s.hc_eps, lane, out);
    }
  }
}

// The tensor-core mixes (hc_mix_tc.cu) where they take the call: rows >= kTcMixRowsFrom, flat a
// multiple of 64; X the streams (F32 or BF16), pre/post/comb as hc_mixes. Returns false, launching
// nothing, where they do not.
constexpr int64_t kTcMixRowsFrom = 256;
bool run_hc_mixes_tc(DeviceContext& ctx, const Tensor& X, const float* fn, const float* base,
                     const float* scale, const MixShape& shape, float* pre, float* post,
                     float* comb);

}  // namespace flashdesk::cuda
