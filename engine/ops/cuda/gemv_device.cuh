// Device pieces of the GEMV kernels shared by linear.cu and moe.cu: how a lane reads and decodes a
// chunk of a weight row in each stored format (4-byte loads, decoded in registers), and the staging
// of activation rows into shared memory with the FP8 act_quant.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/weights.h"

namespace flashdesk::cuda {

constexpr int64_t kGemvRows = 8;  // == kGemvTokens (linear.cuh)
constexpr int kGemvThreads = 256;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerBlock = (kGemvThreads / 32) * kRowsPerWarp;
constexpr int64_t kSplitCols = 1024;  // most activation columns a block stages
constexpr int kUnroll = 2;            // chunks per lane loaded before any is used

struct GemvParams {
  const float* x;
  int64_t x_stride, n;
  const uint8_t* w;
  const uint8_t* scale;
  int64_t scale_cols, out_g, k, k_split;
  int act_quant, vec_ok;
  float* out;  // y, or the split partials [splits][n][out_stride]
  int64_t out_stride, split_stride;
  int round;
};

template <WeightFormat F>
struct Chunk;  // how one lane reads VW consecutive weights of a row
template <>
struct Chunk<WeightFormat::Fp8Block> {
  static constexpr int VW = 4;
  using Raw = uint32_t;
};
template <>
struct Chunk<WeightFormat::Fp4Row> {
  static constexpr int VW = 8;
  using Raw = uint32_t;
};
template <>
struct Chunk<WeightFormat::Bf16> {
  static constexpr int VW = 4;
  using Raw = uint2;
};
template <>
struct Chunk<WeightFormat::F32> {
  static constexpr int VW = 4;
  using Raw = float4;
};

// The raw bits of weights [col, col + VW) of row `row`; columns >= k read as zero.
template <WeightFormat F>
__device__ __forceinline__ typename Chunk<F>::Raw load_raw(const GemvParams& p, int64_t row,
                                                           int64_t col) {
  using Raw = typename Chunk<F>::Raw;
  constexpr int VW = Chunk<F>::VW;
  const bool whole = col + VW <= p.k;
  if constexpr (F == WeightFormat::Fp8Block) {
    const uint8_t* src = p.w + row * p.k + col;
    if (whole && p.vec_ok) return *reinterpret_cast<const uint32_t*>(src);
    Raw r = 0;
    FD_UNROLL
    for (int v = 0; v < VW; ++v)
      if (col + v < p.k) r |= static_cast<uint32_t>(src[v]) << (8 * v);
    return r;
  } else if constexpr (F == WeightFormat::Fp4Row) {
    return *reinterpret_cast<const uint32_t*>(p.w + row * (p.k / 2) + col / 2);  // k % 32 == 0
  } else if constexpr (F == WeightFormat::Bf16) {
    const uint16_t* src = reinterpret_cast<const uint16_t*>(p.w) + row * p.k + col;
    if (whole && p.vec_ok) return *reinterpret_cast<const uint2*>(src);
    uint32_t h[4] = {0, 0, 0, 0};
    FD_UNROLL
    for (int v = 0; v < VW; ++v)
      if (col + v < p.k) h[v] = src[v];
    Raw r;
    r.x = h[0] | (h[1] << 16);
    r.y = h[2] | (h[3] << 16);
    return r;
  } else {
    const float* src = reinterpret_cast<const float*>(p.w) + row * p.k + col;
    if (whole && p.vec_ok) return *reinterpret_cast<const float4*>(src);
    float f[4] = {0, 0, 0, 0};
    FD_UNROLL
    for (int v = 0; v < VW; ++v)
      if (col + v < p.k) f[v] = src[v];
    Raw r;
    r.x = f[0];
    r.y = f[1];
    r.z = f[2];
    r.w = f[3];
    return r;
  }
}

// Weight values without their block scale (FP8 / FP4 codes as numbers; BF16 / F32 as they are).
template <WeightFormat F>
__device__ __forceinline__ void decode(typename Chunk<F>::Raw r, float* wv) {
  if constexpr (F == WeightFormat::Fp8Block) {
    FD_UNROLL
    for (int v = 0; v < 4; ++v) wv[v] = e4m3_to_f32((r >> (8 * v)) & 0xFFu);
  } else if constexpr (F == WeightFormat::Fp4Row) {
    FD_UNROLL
    for (int v = 0; v < 8; ++v) wv[v] = e2m1_to_f32((r >> (4 * v)) & 0xFu);
  } else if constexpr (F == WeightFormat::Bf16) {
    wv[0] = bf16_bits_to_f32(r.x & 0xFFFFu);
    wv[1] = bf16_bits_to_f32(r.x >> 16);
    wv[2] = bf16_bits_to_f32(r.y & 0xFFFFu);
    wv[3] = bf16_bits_to_f32(r.y >> 16);
  } else {
    wv[0] = r.x;
    wv[1] = r.y;
    wv[2] = r.z;
    wv[3] = r.w;
  }
}

template <WeightFormat F>
__device__ __forceinline__ float block_scale(const GemvParams& p, int64_t row, int64_t col) {
  if constexpr (F == WeightFormat::Fp8Block)
    return e8m0_to_f32(p.scale[(row / 32) * p.scale_cols + col / 32]);
  else if constexpr (F == WeightFormat::Fp4Row)
    return e8m0_to_f32(p.scale[row * p.scale_cols + col / 32]);
  else
    return 1.0f;
}

// Stages columns [0, cols) of activation rows t < n (x row stride x_stride) into xs (row stride
// xs_stride, a multiple of 32), act_quant'ed per block of 32 when asked: one warp per block, the
// block maximum by shuffles. Columns up to the next multiple of 32 are written as zero.
__device__ __forceinline__ void stage_rows(const float* x, int64_t x_stride, int64_t n,
                                           int64_t cols, int act_quant, float* xs,
                                           int64_t xs_stride) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t blocks = (cols + 31) / 32;
  for (int64_t i = warp; i < n * blocks; i += warps) {
    const int64_t t = i / blocks, c = (i % blocks) * 32 + lane;
    float v = c < cols ? x[t * x_stride + c] : 0.0f;
    if (act_quant) {
      const float s = e8m0_to_f32(fp8_scale_code(warp_max(fabsf(v))));
      v = e4m3_to_f32(fp8_code(v, s)) * s;
    }
    xs[t * xs_stride + c] = v;
  }
}

}  // namespace flashdesk::cuda
