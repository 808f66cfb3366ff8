// What the routed experts' prefill kernels share (moe_grouped.cu: mma.sync on every GPU;
// moe_grouped_sm90a.cu: wgmma on Hopper): a tile's arguments, the FP4 weights' decoding into BF16
// and the up stage's SwiGLU epilogue. A tile is up to kTilePairs (token row, expert) pairs of one
// expert, planned on the device (moe_grouped.cu).
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/ops/cuda/cuda_compat.cuh"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/moe_grouped.h"
#include "engine/ops/cuda/moe_table.cuh"

namespace flashdesk::cuda {

constexpr int kTilePairs = 128;  // pairs (A rows) of a tile

struct GroupedArgs {
  const ExpertEntry* table;
  const uint16_t* a;          // up: x act_quant'ed [n, dim]; down: h act_quant'ed [pairs, inter]
  const int32_t* rows;        // the pairs' token rows (up)
  const int32_t* slots;       // the pairs' output slots (down)
  const float* weights;       // the pairs' routing weights (up)
  const int32_t* tiles;       // [tiles][3]
  const int32_t* tile_count;  // the tiles planned (the grid is an upper bound)
  int64_t tile0;              // the launch's first tile (grid y is at most 65,535)
  int64_t k, inter, dim;
  float limit;
  float* out;  // up: h [pairs, inter]; down: o [slots, dim]
};

__device__ __forceinline__ float swiglu(float g, float u, float w, float limit) {
  if (limit > 0.0f) {
    u = fminf(fmaxf(u, -limit), limit);
    g = fminf(g, limit);
  }
  return round_bf16(__fmul_rn(__fmul_rn(g / (1.0f + expf(-g)), u), w));
}

// v * scale per BF16 half (fma with -0, which keeps a zero's sign): exact for the E2M1 values
// times a power of two in BF16's normal range.
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t v, uint32_t scale) {
#ifdef FLASHDESK_CUDA_EMU
  const auto half = [](uint32_t x, uint32_t s) -> uint32_t {
    return f32_to_bf16_bits(bf16_bits_to_f32(x & 0xFFFFu) * bf16_bits_to_f32(s & 0xFFFFu));
  };
  return half(v, scale) | (half(v >> 16, scale >> 16) << 16);
#else
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(v), "r"(scale), "r"(0x80008000u));
  return d;
#endif
}

// Eight FP4 (E2M1) codes, code i in nibble i, times the BF16x2 `scale` as BF16 pairs (codes 0 1,
// 2 3, 4 5, 6 7; the even code in the low half). A code's magnitude picks the high and the low
// byte of its BF16 value from two byte tables (prmt), its sign goes to the high byte, and one
// BF16x2 multiply by the power-of-two scale is exact: about 3 instructions a code, where
// converting through FP32 took about 10 (the kernel was issue-bound on that decoding).
__device__ __forceinline__ void e2m1x8_to_bf16(uint32_t w, uint32_t scale, uint32_t (&r)[4]) {
  // BF16 of 0, 0.5, 1, 1.5 | 2, 3, 4, 6: high bytes 00 3F 3F 3F | 40 40 40 40, low bytes
  // 00 00 80 C0 | 00 40 80 C0.
  constexpr uint32_t kHigh03 = 0x3F3F3F00u, kHigh47 = 0x40404040u;
  constexpr uint32_t kLow03 = 0xC0800000u, kLow47 = 0xC0804000u;
  FD_UNROLL
  for (int h = 0; h < 2; ++h) {
    const uint32_t x = h == 0 ? w : w >> 16;  // codes 4h .. 4h + 3 in the low 16 bits
    const uint32_t magnitudes = x & 0x7777u;
    const uint32_t low = __byte_perm(kLow03, kLow47, magnitudes);
    // Code j's sign (bit 4j + 3 of x) to bit 7 of byte j: the two code bytes, each twice.
    const uint32_t twice = __byte_perm(x, 0, 0x1100);
    const uint32_t high = __byte_perm(kHigh03, kHigh47, magnitudes) | ((twice << 4) & 0x00800080u) |
                          (twice & 0x80008000u);
    r[2 * h] = scale_bf16x2(__byte_perm(low, high, 0x5140), scale);
    r[2 * h + 1] = scale_bf16x2(__byte_perm(low, high, 0x7362), scale);
  }
}

// A tile's result for one pair and two adjacent weight rows b, b + 1 of the CTA's block (whose
// first column, or output dim, is col0): up, the SwiGLU of column col0 + b / 2's gate (v0) and up
// (v1) value into h; down, the slot's two output values, each rounded to BF16.
template <bool kUp>
__device__ __forceinline__ void store_pair_result(const GroupedArgs& a, int pair, int64_t col0,
                                                  int b, float v0, float v1) {
  if constexpr (kUp) {
    a.out[static_cast<int64_t>(pair) * a.inter + col0 + b / 2] =
        swiglu(round_bf16(v0), round_bf16(v1), a.weights[pair], a.limit);
  } else {
    float2 r;
    r.x = round_bf16(v0);
    r.y = round_bf16(v1);
    *reinterpret_cast<float2*>(a.out + static_cast<int64_t>(a.slots[pair]) * a.dim + col0 + b) = r;
  }
}

// One stage's launches of Kernel (named `name` in errors) over every planned tile: grid
// (columns, the tiles' upper bound), grid y at most 65,535 a launch (a prompt of ~1.4M tokens at
// top-6), each launch's first tile in a.tile0; blocks past the planned count leave at once.
template <auto Kernel>
void launch_tiles(DeviceContext& ctx, const char* name, GroupedArgs a, unsigned columns,
                  int64_t max_tiles, unsigned threads, size_t smem) {
  allow_dynamic_smem<Kernel>(smem);
  for (a.tile0 = 0; a.tile0 < max_tiles; a.tile0 += 65535) {
    const auto rows_y = static_cast<unsigned>(std::min<int64_t>(65535, max_tiles - a.tile0));
    launch_kernel(name, __FILE__, __LINE__, Kernel, dim3(columns, rows_y), dim3(threads), smem,
                  ctx.stream(), a);
  }
}

// One stage of every planned tile on the wgmma kernels (moe_grouped_sm90a.cu; where
// grouped_wgmma_runs()), CTAs of 256 weight rows (wide: where grouped_wgmma_wide_fits) or 128:
// up, column blocks of 128 or 64 gate and up columns; down, blocks of 256 or 128 output dims.
bool grouped_wgmma_wide_fits(int64_t dim, int64_t inter);
void launch_grouped_wgmma(DeviceContext& ctx, const GroupedArgs& a, bool up, int64_t max_tiles,
                          bool wide);

}  // namespace flashdesk::cuda
