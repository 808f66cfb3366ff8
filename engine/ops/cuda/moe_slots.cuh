// The decode experts' grouped slots (moe.cu, moe_decode_tc.cu): up to 8 activation rows, each
// with its k routed experts and (below kSharedApartRows rows) the shared one, one slot per (row,
// expert), the kernels' blockIdx.y running over parts of slots.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/cuda_compat.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/moe_table.cuh"
#include "engine/ops/cuda/no_padding.h"
#include "engine/ops/weights.h"

namespace flashdesk::cuda {

// Routed experts per token: the router's picks and the sums' slot order are held per warp lane.
constexpr int kMaxTopK = 32;

FD_NO_PADDING_BEGIN
struct SlotArgs {
  const ExpertEntry* table;  // [n_routed + 1]: the shared expert last
  const int32_t* ids;        // [n, k]
  const float* weights;      // [n, k]
  int64_t n, k, slots_per_row, n_routed;
  int has_shared;
  float limit;
  // The grouped kernels' blockIdx.y runs over parts of slots: one per routed slot and, when they
  // run the shared expert (below kSharedApartRows rows), shared_parts for its slot: its weights'
  // bytes over a routed expert's (FP8 against FP4: 2), so that every block streams about the
  // same bytes. With one part a slot, V4.1's FP8 shared expert kept its blocks busy twice as long
  // as the FP4 routed ones while the wave waited on them (1.2-1.8 TB/s).
  int64_t parts_per_row, shared_parts;
  // The shared expert's term computed ahead ([n, dim], CudaBackend::moe_routed_experts_plus), added
  // last by the sums in place of a shared slot's output; null: none.
  const float* shared_out = nullptr;
  int round_sum = 0;  // the rows' sums rounded to BF16 (CudaBackend::moe_experts_rounded)
  int padding = 0;
};
FD_NO_PADDING_END
template <>
inline constexpr bool kNoPaddingDeclared<SlotArgs> = true;  // its floats

// The slot of the grouped kernels' blockIdx.y, and which part of its row tiles it takes.
struct SlotPart {
  int64_t slot, part, parts;
};
__device__ __forceinline__ SlotPart grouped_slot(const SlotArgs& a) {
  const int64_t y = blockIdx.y, row = y / a.parts_per_row, j = y % a.parts_per_row;
  if (j < a.k) return {row * a.slots_per_row + j, 0, 1};
  return {row * a.slots_per_row + a.k, j - a.k, a.shared_parts};
}

// Tiles [first, first + count) of a slot's `tiles` that part sp takes.
__device__ __forceinline__ void part_tiles(const SlotPart& sp, int64_t tiles, int64_t* first,
                                           int64_t* count) {
  *first = sp.part * tiles / sp.parts;
  *count = (sp.part + 1) * tiles / sp.parts - *first;
}

// The expert of slot s (row s / slots_per_row, column j): routed columns j < k, then the shared.
// Read through L2: the tensor-core kernels read the router's ids and weights before their wait
// for the previous grid (moe_decode_tc.cu says why that is safe), when a line of them cached in
// L1 could be stale.
__device__ __forceinline__ int64_t slot_expert(const SlotArgs& a, int64_t s, float* weight) {
  const int64_t t = s / a.slots_per_row, j = s % a.slots_per_row;
  if (j < a.k) {
    *weight = __ldcg(a.weights + t * a.k + j);
    return __ldcg(a.ids + t * a.k + j);
  }
  *weight = 1.0f;
  return a.n_routed;
}

// The order in which row t's slot outputs are summed (the definition's): order[r] = the slot
// column of the row's r-th smallest routed id, -1 where that expert is not on this device (equal
// ids, only the -1 of a row with no finite score, by column). One warp calls it; the order is
// visible to that warp after it returns (to the block after a barrier).
__device__ __forceinline__ void rank_row_slots(const SlotArgs& a, int64_t t, int32_t* order) {
  const unsigned lane = threadIdx.x & 31u;
  const int32_t id = lane < a.k ? a.ids[t * a.k + lane] : 0;
  int rank = 0;
  for (int j = 0; j < static_cast<int>(a.k); ++j) {
    const int32_t other = __shfl_sync(kFullMask, id, j);
    rank += other < id || (other == id && j < static_cast<int>(lane));
  }
  const bool here = id >= 0 && id < a.n_routed && a.table[id].data[0] != nullptr;
  if (lane < a.k) order[rank] = here ? static_cast<int32_t>(lane) : -1;
  __syncwarp();
}

// The ordered sums of row t at columns d .. d + W - 1 (W 1, or 4 with the columns 16-byte
// aligned: a prefill's sum read 4 bytes a thread a slot otherwise, 2.0 TB/s over an 8K-token
// layer's 1.2 GB): `row` points at the row's slot 0 output at column d (slots `dim` apart); the
// routed outputs in `order`, then the shared expert's (its slot's, or the term computed ahead).
// Read through L2 (other blocks may have written them in the same kernel), every load issued
// before the sums.
template <int W>
__device__ __forceinline__ void ordered_slot_sums(const SlotArgs& a, const int32_t* order,
                                                  const float* row, int64_t dim, int64_t t,
                                                  int64_t d, float (&acc)[W]) {
  static_assert(W == 1 || W == 4);
  const auto add = [&](const float* p) {
    if constexpr (W == 4) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(p));
      acc[0] += v.x;
      acc[1] += v.y;
      acc[2] += v.z;
      acc[3] += v.w;
    } else {
      acc[0] += __ldcg(p);
    }
  };
  FD_UNROLL
  for (int i = 0; i < W; ++i) acc[i] = 0.0f;
  FD_UNROLL
  for (int r = 0; r < kMaxTopK; ++r) {
    if (r >= a.k) break;
    if (order[r] >= 0) add(row + order[r] * dim);
  }
  if (a.has_shared) add(row + a.k * dim);
  if (a.shared_out != nullptr) add(a.shared_out + t * dim + d);
  if (a.round_sum) {
    FD_UNROLL
    for (int i = 0; i < W; ++i) acc[i] = round_bf16(acc[i]);
  }
}

// fn.template operator()<F>() for the run-time format `format`.
template <class Fn>
__device__ void with_format(int32_t format, Fn&& fn) {
  switch (static_cast<WeightFormat>(format)) {
    case WeightFormat::Fp8Block:
      fn.template operator()<WeightFormat::Fp8Block>();
      break;
    case WeightFormat::Fp4Row:
      fn.template operator()<WeightFormat::Fp4Row>();
      break;
    case WeightFormat::Bf16:
      fn.template operator()<WeightFormat::Bf16>();
      break;
    case WeightFormat::F32:
      fn.template operator()<WeightFormat::F32>();
      break;
  }
}

}  // namespace flashdesk::cuda
