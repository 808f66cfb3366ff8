// What the tensor-core decode kernels (the experts, moe_decode_tc.cu; the dense FP8 linears,
// gemv_tc.cu) share: activations act_quant'ed into E4M3 values held as FP16 bits in the B
// fragments' order, and the FP4 / FP8 weight codes as FP16 A fragments (mma.cuh's m16n8k16).
#pragma once

#include <cstdint>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/gemv_device.cuh"
#include "engine/ops/cuda/kernel_util.cuh"

namespace flashdesk::cuda {

// Activations as the kernels read them: per 32-column block, the E4M3 values of act_quant as FP16
// bits in the B fragments' order (lane group q's columns 8q .. 8q+7 as c0 c4 c1 c5 c2 c6 c3 c7,
// so one 16-byte read gives both k16 products' fragments), and the block's scale.
struct TcActs {
  uint16_t* values;  // [rows, k]
  float* scales;     // [rows, k / 32]
};

// FP16 bits of v, an E4M3 value (normal in FP16, or zero: e4m3_round clamps, as the CUDA-core
// kernels' staging does).
__device__ __forceinline__ uint16_t f16_bits_of_e4m3_value(float v) {
  const uint32_t u = __float_as_uint(v), sign = (u >> 16) & 0x8000u, mag = u & 0x7FFFFFFFu;
  return static_cast<uint16_t>(
      mag == 0 ? sign : sign | (((mag >> 23) - 112u) << 10) | ((mag >> 13) & 0x3FFu));
}

// One warp, lane j holding column j of a 32-column block: act_quant (the CPU's to the bit:
// docs/numerics.md "Linear layers"), each value stored at its fragment position in `values32`.
__device__ __forceinline__ void quantize_block(float v, uint16_t* values32, float* scale) {
  const unsigned lane = threadIdx.x & 31u;
  const float s = e8m0_to_f32(fp8_scale_code(warp_max(fabsf(v))));
  const unsigned j = lane % 8;
  values32[(lane / 8) * 8 + (j % 4) * 2 + j / 4] = f16_bits_of_e4m3_value(e4m3_round(v, 1.0f / s));
  if (lane == 0) *scale = s;
}

// ---- weights ----

// Eight FP4 (E2M1) codes (columns 8q .. 8q+7 of a block, column 8q + i in nibble i) as FP16
// pairs of columns (i, i + 4), times 2^-14: a nibble's magnitude bits placed at FP16 bits 9..11
// are its value times 2^-14 (the 0.5 code a subnormal), its sign at bit 15.
__device__ __forceinline__ void e2m1x8_to_f16(uint32_t w, uint32_t (&r)[4]) {
  constexpr uint32_t kMag = 0x0E000E00u, kSign = 0x80008000u;
  r[0] = ((w << 9) & kMag) | ((w << 12) & kSign);
  r[1] = ((w << 5) & kMag) | ((w << 8) & kSign);
  r[2] = ((w << 1) & kMag) | ((w << 4) & kSign);
  r[3] = ((w >> 3) & kMag) | (w & kSign);
}

// Eight FP8 (E4M3) codes (columns 8q .. 8q+3 in lo, 8q+4 .. 8q+7 in hi) as FP16 pairs of columns
// (i, i + 4), times 2^-8: the code's magnitude bits at FP16 bits 7..13, its sign at 15.
__device__ __forceinline__ void e4m3x8_to_f16(uint32_t lo, uint32_t hi, uint32_t (&r)[4]) {
  FD_UNROLL
  for (int i = 0; i < 4; ++i) {
    const uint32_t x = __byte_perm(lo, hi, static_cast<unsigned>(((4 + i) << 8) | i));
    r[i] = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u);
  }
}

// x [rows, k] (row stride k, k a multiple of 32) act_quant'ed into `out` ([rows, k] values,
// [rows, k / 32] scales): one launch, a warp per 32-column block.
void quantize_acts_tc(DeviceContext& ctx, const float* x, int64_t rows, int64_t k, TcActs out);

// ---- the K units a warp streams ----

// Units first, first + stride, ... (count of them) of 64 bytes of each of a tile's rows. A tile's
// units [p0, p1) go to its Q warps as Q contiguous ranges, or interleaved (warp w takes p0 + w,
// p0 + w + Q, ...), so that at any moment the Q warps read neighbouring 64-byte pieces of each
// row: one run of Q * 64 bytes where the ranges read Q runs of 64 far apart
// (FLASHDESK_CUDA_UNITS; each warp's sum then covers other units, so the FP32 order changes).
struct UnitSeq {
  int64_t first, count, stride;
  __device__ __forceinline__ int64_t at(int64_t i) const { return first + i * stride; }
};
__device__ __forceinline__ UnitSeq warp_units(int64_t p0, int64_t p1, int w, int Q,
                                              bool interleaved) {
  if (interleaved) return {p0 + w, p1 - p0 > w ? (p1 - p0 - w + Q - 1) / Q : 0, Q};
  const int64_t u0 = p0 + w * (p1 - p0) / Q, u1 = p0 + (w + 1) * (p1 - p0) / Q;
  return {u0, u1 - u0, 1};
}

}  // namespace flashdesk::cuda
