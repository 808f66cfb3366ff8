// Linear layers of the CUDA backend, shared by linear.cu (dense and grouped linears) and moe.cu
// (the experts): the two paths —
//   GEMV (at most kGemvTokens rows): weight-streaming kernels (gemv_device.cuh): each warp reads
//     2 to 8 weight rows with 16-byte streaming loads (4 to 8 in flight per lane), decodes FP8 /
//     FP4 / BF16 in registers and multiplies them with the activation rows staged in shared
//     memory (act_quant'ed there) once per block, the block looping over its share of the row
//     tiles (about one wave of blocks); the K dimension is split across blocks when the tiles
//     alone would give less than a wave, and the splits are summed in order by a second kernel;
//   GEMM (more rows): the weight dequantised to a BF16 scratch matrix (exact: every stored value
//     is a BF16 value), the activation act_quant'ed to BF16 (exact too), one cuBLAS product with
//     FP32 accumulation, then the BF16 rounding of the output.
// Both differ from the CPU reference only in the order of the FP32 sums (docs/numerics.md).
#pragma once

#include <cstdint>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/weights.h"

namespace flashdesk::cuda {

constexpr int64_t kGemvTokens = 8;

// One GEMV job: y rows t < n, output rows [0, groups*out_g) of a (grouped) linear weight.
struct GemvJob {
  const float* x = nullptr;  // [n, x_stride] F32, group g reads columns [g*k, (g+1)*k)
  int64_t x_stride = 0;
  int64_t n = 0;
  const LinearWeight* w = nullptr;  // [groups*out_g, k]
  int64_t out_g = 0, groups = 1, k = 0;
  bool act_quant = false;
  float* y = nullptr;  // [n, y_stride]; row o of the weight -> column o (GEMV: any y_stride)
  int64_t y_stride = 0;
  bool round_bf16 = true;
  // gemm only: x already staged as BF16 [n, x_stride] (act_quant'ed where act_quant says, by
  // act_quant_to_bf16), so that products sharing an input stage it once; F32 weights need x.
  const uint16_t* x_bf16 = nullptr;
};
void gemv(DeviceContext& ctx, const GemvJob& job);

// The same contract through dequantisation and cuBLAS (any n).
void gemm(DeviceContext& ctx, const GemvJob& job);

// out = bf16(act_quant(x)) for rows x [n, cols] F32 (exact in BF16: FP8 values times a power of
// two), the input of the tensor-core and cuBLAS products.
void act_quant_to_bf16(DeviceContext& ctx, const float* x, int64_t n, int64_t cols, uint16_t* out);

// The linear of docs/numerics.md on device rows x [n, w.in] -> y [n, w.out] (y may not alias x).
void run_linear(DeviceContext& ctx, const float* x, int64_t n, const LinearWeight& w,
                LinearMode mode, float* y);

}  // namespace flashdesk::cuda
