// Staging of a query's keys into shared memory as BF16 rows for the decode attention kernels on the
// tensor cores: parts of 64-slot blocks (attention_split_tc.cu; the prefill kernel,
// attention_tc.cu, copies whole blocks' raw rows ahead and decodes them with bf16_codes.cuh). FP8
// window rows (x UE8M0 per 32) and FP4 entries (x E4M3 per 16) are exact in BF16, so the staged
// keys are the definition's values.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/attention_args.cuh"
#include "engine/ops/cuda/mma.cuh"

namespace flashdesk::cuda {

// One group of 4 consecutive values (dims d..d+3) of a key row: its code word and scale byte.
// Window rows (D + D / 32 bytes: FP8 codes, then a UE8M0 per 32) are 4-byte aligned for D a
// multiple of 128; FP4 entries (9 D / 16 bytes: codes, then an E4M3 per 16) 2-byte aligned.
template <int D>
__device__ __forceinline__ void load_key_group(const uint8_t* row, bool fp4, int d, uint32_t* raw,
                                               uint8_t* scale) {
  constexpr bool kWordRows = (D + D / 32) % 4 == 0;
  *raw = 0;
  *scale = 0;
  if (row && !fp4) {
    *raw = kWordRows
               ? load_aligned<uint32_t>(row + d)
               : row[d] | (row[d + 1] << 8) | (row[d + 2] << 16) | (uint32_t{row[d + 3]} << 24);
    *scale = row[D + d / 32];
  } else if (row) {
    *raw = load_aligned<uint16_t>(row + d / 2);
    *scale = row[D / 2 + d / 16];
  }
}

// The group as four BF16 values (0 for an empty slot), two to a word: the codes placed in an FP32
// word by bit arithmetic (e4m3_exact / e2m1_exact) times the scale, exact in BF16.
__device__ __forceinline__ uint2 decode_key_group(const uint8_t* row, bool fp4, uint32_t raw,
                                                  uint8_t scale) {
  uint16_t v[4] = {0, 0, 0, 0};
  if (row && !fp4) {
    const float sc = e8m0_to_f32(scale);
    for (int i = 0; i < 4; ++i) v[i] = f32_to_bf16_bits(e4m3_exact((raw >> (8 * i)) & 0xFFu) * sc);
  } else if (row) {
    const float sc = e4m3_exact(scale);
    for (int i = 0; i < 4; ++i) v[i] = f32_to_bf16_bits(e2m1_exact((raw >> (4 * i)) & 0xFu) * sc);
  }
  return uint2{pack_bf16_pair(v[0], v[1]), pack_bf16_pair(v[2], v[3])};
}

// Slots [first, first + Slots) of query t, dims [d_lo, d_lo + DP) of each, as BF16 rows
// keys[Slots][DP + Pad] (0 for empty slots); false, for every thread, where no slot has a key.
// Every thread issues all its loads at once (the decode kernels' small parts: one round).
template <int Slots, int DP, int D, int Threads, int Pad>
__device__ bool stage_key_part(const AttnArgs& a, int64_t t, int64_t first, int d_lo,
                               uint16_t* keys, const uint8_t** rows, int* fp4s) {
  constexpr int kStride = DP + Pad, kGroupsPerRow = DP / 4, kGroups = Slots * kGroupsPerRow;
  constexpr int kPerThread = (kGroups + Threads - 1) / Threads;
  bool mine = false;
  if (threadIdx.x < Slots) {
    bool fp4 = false;
    const uint8_t* row = slot_row(a, t, first + threadIdx.x, &fp4);
    rows[threadIdx.x] = row;
    fp4s[threadIdx.x] = fp4;
    mine = row != nullptr;
  }
  if (!__syncthreads_or(mine)) return false;
  uint32_t raw[kPerThread] = {};
  uint8_t scale[kPerThread] = {};
  FD_UNROLL
  for (int u = 0; u < kPerThread; ++u) {
    const int g = u * Threads + static_cast<int>(threadIdx.x);
    if (g >= kGroups) continue;
    const int s = g / kGroupsPerRow;
    load_key_group<D>(rows[s], fp4s[s], d_lo + g % kGroupsPerRow * 4, &raw[u], &scale[u]);
  }
  FD_UNROLL
  for (int u = 0; u < kPerThread; ++u) {
    const int g = u * Threads + static_cast<int>(threadIdx.x);
    if (g >= kGroups) continue;
    const int s = g / kGroupsPerRow;
    *reinterpret_cast<uint2*>(keys + s * kStride + g % kGroupsPerRow * 4) =
        decode_key_group(rows[s], fp4s[s], raw[u], scale[u]);
  }
  __syncthreads();
  return true;
}

}  // namespace flashdesk::cuda
