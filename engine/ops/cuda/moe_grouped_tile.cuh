// What the routed experts' prefill kernels share (moe_grouped.cu: mma.sync on every GPU;
// moe_grouped_sm90a.cu: wgmma on Hopper): a tile's arguments, the FP4 weights' decoding into BF16
// and the up stage's SwiGLU epilogue. A tile is up to kTilePairs (token row, expert) pairs of one
// expert, planned on the device (moe_grouped.cu).
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/ops/cuda/bf16_codes.cuh"
#include "engine/ops/cuda/cuda_compat.cuh"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/moe_grouped.h"
#include "engine/ops/cuda/moe_table.cuh"
#include "engine/ops/cuda/no_padding.h"

namespace flashdesk::cuda {

constexpr int kTilePairs = 128;  // pairs (A rows) of a tile

FD_NO_PADDING_BEGIN
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
  // The wgmma kernels: products over the tile's pairs rounded up to 32 (1) or over all its rows.
  int fitted_products;
  float* out;  // up: h [pairs, inter]; down: o [slots, dim]
};
FD_NO_PADDING_END
template <>
inline constexpr bool kNoPaddingDeclared<GroupedArgs> = true;  // its floats

__device__ __forceinline__ float swiglu(float g, float u, float w, float limit) {
  if (limit > 0.0f) {
    u = fminf(fmaxf(u, -limit), limit);
    g = fminf(g, limit);
  }
  return round_bf16(__fmul_rn(__fmul_rn(g / (1.0f + expf(-g)), u), w));
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
