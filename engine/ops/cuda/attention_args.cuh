// The sparse attention kernels' shared view of one call (attention.cu, attention_tc.cu): the
// queries, the window ring and this step's window rows, the compressed entries and each query's
// top-k, and the lookup of the cache row behind a slot of a query's key list (docs/numerics.md
// "Sparse attention": W window slots, then the top-k columns).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/no_padding.h"

namespace flashdesk::cuda {

constexpr int kBlockSlots = 64;  // the definition's softmax block
constexpr int64_t kMaxDim = 512;
constexpr float kMinit = -1e30f;  // the running maximum's start (the sink is not in it)

FD_NO_PADDING_BEGIN
struct AttnArgs {
  const float* q;  // [n, H, D]
  const int64_t* positions;
  const int64_t* ring_positions;  // [W]
  // [2]: the position of the step's first row and the count of entries that exist. In device
  // memory (uploaded with the ring's positions), not parameters: they change every step, and a
  // step graph replays a recorded step only where its kernels' parameters are the same
  // (step_graph.h).
  const int64_t* step_values;
  const uint8_t* ring;  // [W, win_bytes]
  const uint8_t* step;  // [n_step, win_bytes]
  int64_t window;
  const uint8_t* entries;  // [*, entry_bytes]
  const int32_t* topk;     // [n, kc]
  int64_t kc;
  int64_t n, heads, dim, slots, blocks;  // slots = W + kc, blocks = ceil(slots / 64)
  float softmax_scale;
  int32_t padding = 0;
  // Set: the combine kernel undoes RoPE on the last 2 * rope_pairs values of each head of its
  // output (Backend::sparse_attention_unrotated); inv_freq [rope_pairs].
  const float* unrotate_freq;
  int64_t rope_pairs;
};
FD_NO_PADDING_END
template <>
inline constexpr bool kNoPaddingDeclared<AttnArgs> = true;  // its floats

// A slot's cache row, as the prefill kernels stage it (attention_tc.cu, attention_wgmma_sm90a.cu):
// an FP8 window row (D codes, a UE8M0 per 32) or an FP4 entry (D / 2 bytes of codes, an E4M3 per
// 16).
__host__ __device__ constexpr int window_row_bytes(int d) {
  return d + d / 32;
}
__host__ __device__ constexpr int entry_row_bytes(int d) {
  return d / 2 + d / 16;
}
// A staged raw row's bytes (the larger format, rounded up to 16).
__host__ __device__ constexpr int raw_stride(int d) {
  const int w = window_row_bytes(d), e = entry_row_bytes(d);
  return ((w > e ? w : e) + 15) / 16 * 16;
}
// The copies' unit: the largest cp.async size (16, 8, 4) dividing both row sizes; 2 where none
// does (D = 64's 66-byte window rows), which copies through registers.
__host__ __device__ constexpr int copy_unit(int d) {
  const int w = window_row_bytes(d), e = entry_row_bytes(d);
  return w % 16 == 0 && e % 16 == 0 ? 16
         : w % 8 == 0 && e % 8 == 0 ? 8
         : w % 4 == 0 && e % 4 == 0 ? 4
                                    : 2;
}

// Whether the caches' rows start on the copies' unit (copy_unit(d)): the prefill kernels' launch
// condition.
inline bool rows_aligned_for_copies(const AttnArgs& a, int d) {
  const uintptr_t mask = static_cast<uintptr_t>(copy_unit(d) - 1);
  for (const void* p : {static_cast<const void*>(a.ring), static_cast<const void*>(a.step),
                        static_cast<const void*>(a.entries)})
    if ((reinterpret_cast<uintptr_t>(p) & mask) != 0) return false;
  return true;
}

// The cache row behind slot s of query t (nullptr: empty); *fp4 says which format it has.
__device__ inline const uint8_t* slot_row(const AttnArgs& a, int64_t t, int64_t s, bool* fp4) {
  *fp4 = false;
  if (s >= a.slots) return nullptr;
  if (s < a.window) {
    const int64_t p = a.positions[t];
    const int64_t pos = lmax(0, p - a.window + 1) + s;
    if (pos > p) return nullptr;
    const int64_t win_bytes = a.dim + a.dim / 32;
    const int64_t step_first = a.step_values[0];
    if (pos >= step_first) return a.step + (pos - step_first) * win_bytes;
    const int64_t slot = pos % a.window;
    return a.ring_positions[slot] == pos ? a.ring + slot * win_bytes : nullptr;
  }
  const int32_t id = a.topk[t * a.kc + (s - a.window)];
  if (id < 0 || id >= a.step_values[1]) return nullptr;
  *fp4 = true;
  return a.entries + static_cast<int64_t>(id) * (a.dim / 2 + a.dim / 16);
}

// The output of a query's attention launched on the tensor cores (attention_tc.cu), or false where
// the shapes are not the ones it takes (heads <= 64, head dim a multiple of 64 up to 512): the
// caller then runs the CUDA-core kernels. `out` [n, heads, dim] FP32 holding BF16 values.
bool attention_on_tensor_cores(cudaStream_t stream, const AttnArgs& a, const float* sink,
                               float* out);

// The same on Hopper's warpgroup products (attention_wgmma_sm90a.cu), or false where the device
// does not run sm_90a code or the shapes are not the ones it takes (heads <= 64, head dim 128, 256
// or 512): the caller then runs attention_on_tensor_cores.
bool attention_on_warpgroups(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out);

// Where the split tensor-core kernels (attention_split_tc.cu) put one call's parts: scores
// [n, heads, blocks * 64] and the maxima of each 16-slot quarter of a block [n, blocks * 4, heads]
// between its two kernels, then per 64-slot block the running maximum and sum of p [n, blocks,
// heads] and the value sums [n, blocks, heads, dim] that attention.cu's combine adds up.
constexpr int kSplitSlotParts = 4;
struct SplitScratch {
  float* scores;
  float* quarter_max;
  float* part_m;
  float* part_s;
  float* part_acc;
};

// Decode-sized calls: the two split kernels launched (one CTA per query, 64-slot block and 16
// heads), or false where the head dim is not one they take (64, 128, 256 or 512).
bool attention_split_on_tensor_cores(cudaStream_t stream, const AttnArgs& a, const SplitScratch& s);

}  // namespace flashdesk::cuda
