// The decode experts' grouped slots (moe.cu, moe_decode_tc.cu): up to 8 activation rows, each
// with its k routed experts and (below kSharedApartRows rows) the shared one, one slot per (row,
// expert), the kernels' blockIdx.y running over parts of slots.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/cuda_compat.cuh"
#include "engine/ops/cuda/moe_table.cuh"
#include "engine/ops/weights.h"

namespace flashdesk::cuda {

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
};

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
__device__ __forceinline__ int64_t slot_expert(const SlotArgs& a, int64_t s, float* weight) {
  const int64_t t = s / a.slots_per_row, j = s % a.slots_per_row;
  if (j < a.k) {
    *weight = a.weights[t * a.k + j];
    return a.ids[t * a.k + j];
  }
  *weight = 1.0f;
  return a.n_routed;
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
