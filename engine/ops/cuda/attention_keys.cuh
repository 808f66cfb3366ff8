// Staging of one 64-slot block of a query's keys into shared memory as BF16 rows, shared by the
// tensor-core attention kernels (attention_tc.cu: prefill, one CTA per query;
// attention_split_tc.cu: decode, one CTA per block). FP8 window rows (x UE8M0 per 32) and FP4
// entries (x E4M3 per 16) are exact in BF16, so the staged keys are the definition's values.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/attention_args.cuh"
#include "engine/ops/cuda/mma.cuh"

namespace flashdesk::cuda {

// Threads: the CTA's threads (at least 64); MaxInFlight: 4-value key groups a thread loads before
// it decodes any (the rows are scattered over the caches: their latency, not their bytes, is what
// staging costs).
// Block b's 64 keys of query t as BF16 rows (0 for empty slots); any[b & 1][w] says whether
// warp w's 32 slots hold a key (two sets: a warp that has moved on to the next block's lookups
// must not overwrite flags a slower warp has yet to read).
template <int D, int Threads, int MaxInFlight>
__device__ bool stage_block_keys(const AttnArgs& a, int64_t t, int64_t b, uint16_t* keys,
                                 int key_stride, const uint8_t** rows, int* fp4s, int (*any)[2]) {
  if (threadIdx.x < kBlockSlots) {
    bool fp4 = false;
    const uint8_t* row = slot_row(a, t, b * kBlockSlots + threadIdx.x, &fp4);
    rows[threadIdx.x] = row;
    fp4s[threadIdx.x] = fp4;
    const unsigned has = __ballot_sync(kFullMask, row != nullptr);
    if ((threadIdx.x & 31u) == 0) any[b & 1][threadIdx.x >> 5] = has != 0;
  }
  __syncthreads();
  if (!any[b & 1][0] && !any[b & 1][1]) return false;
  // Window rows (D + D / 32 bytes) are 4-byte aligned for D a multiple of 128; FP4 entries
  // (9 D / 16 bytes) 2-byte aligned.
  constexpr bool kWordRows = (D + D / 32) % 4 == 0;
  constexpr int kGroupsPerRow = D / 4, kGroups = kBlockSlots * kGroupsPerRow;
  constexpr int kInFlight = kGroups / Threads < MaxInFlight ? kGroups / Threads : MaxInFlight;
  static_assert(kGroups % (Threads * kInFlight) == 0, "whole rounds of key groups");
  for (int g0 = 0; g0 < kGroups; g0 += Threads * kInFlight) {
    uint32_t raw[kInFlight];
    uint8_t scale[kInFlight];
    FD_UNROLL
    for (int u = 0; u < kInFlight; ++u) {
      const int g = g0 + u * Threads + static_cast<int>(threadIdx.x);
      const int s = g / kGroupsPerRow, d = g % kGroupsPerRow * 4;
      const uint8_t* row = rows[s];
      raw[u] = 0;
      scale[u] = 0;
      if (row && !fp4s[s]) {
        raw[u] = kWordRows ? load_aligned<uint32_t>(row + d)
                           : row[d] | (row[d + 1] << 8) | (row[d + 2] << 16) |
                                 (uint32_t{row[d + 3]} << 24);
        scale[u] = row[D + d / 32];
      } else if (row) {
        raw[u] = load_aligned<uint16_t>(row + d / 2);
        scale[u] = row[D / 2 + d / 16];
      }
    }
    FD_UNROLL
    for (int u = 0; u < kInFlight; ++u) {
      const int g = g0 + u * Threads + static_cast<int>(threadIdx.x);
      const int s = g / kGroupsPerRow, d = g % kGroupsPerRow * 4;
      uint16_t v[4] = {0, 0, 0, 0};
      if (rows[s] && !fp4s[s]) {
        const float sc = e8m0_to_f32(scale[u]);
        for (int i = 0; i < 4; ++i)
          v[i] = f32_to_bf16_bits(e4m3_exact((raw[u] >> (8 * i)) & 0xFFu) * sc);
      } else if (rows[s]) {
        const float sc = e4m3_exact(scale[u]);
        for (int i = 0; i < 4; ++i)
          v[i] = f32_to_bf16_bits(e2m1_exact((raw[u] >> (4 * i)) & 0xFu) * sc);
      }
      uint2 w;
      w.x = pack_bf16_pair(v[0], v[1]);
      w.y = pack_bf16_pair(v[2], v[3]);
      *reinterpret_cast<uint2*>(keys + s * key_stride + d) = w;
    }
  }
  __syncthreads();
  return true;
}

}  // namespace flashdesk::cuda
