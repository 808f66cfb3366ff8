// torch.topk's CPU selection (engine/util/torch_select.h) run by a whole thread block: the same
// steps on the same input, so the same arrangement, with the O(n) parts spread over the threads.
// Scores rounded to BF16 tie at the k-th best in most indexer rows, so this runs often and the
// one-thread version cost more than the rest of a decode layer (docs/cuda-backend.md).
//   - introselect's partition (libstdc++'s unguarded Hoare partition): its j-th swap exchanges the
//     j-th element from the left where the left scan stops (not before the pivot) with the j-th
//     from the right where the right scan stops (the pivot not before it), as long as the first
//     lies left of the second. Both stop lists come from one pass over the untouched range (warp
//     ballots over contiguous segments, placed by a scan of the warps' counts): the scans of swap
//     j only cross elements no earlier swap moved, and the element a swap puts behind a scan
//     stops it where the other list would. The swaps are disjoint, so they run at
//     once, and the cut is where the scans meet. The median-of-three pivot, the insertion sort of
//     the last <= 3 elements and the bookkeeping stay on one thread (constant work).
//   - heap select (torch's partial_sort when 64 k <= n, and introselect's depth-limit fallback):
//     the heap's top only moves to better values, so an element not before the top when a chunk
//     starts cannot enter during that chunk; the block tests a chunk at once and one thread runs
//     the heap steps of the few that may enter, in index order. The heap's own steps stay serial.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/util/torch_select.h"

namespace flashdesk::cuda {

constexpr int kHeapChunkPerThread = 4;  // elements each thread tests per heap-select chunk

// A block's working room: two index lists as long as the row, in global memory (int32) or, for
// rows of at most 65,536 pairs, in shared memory (uint16: half the room, so a V4.1 decode row of
// 16,384 entries fits beside its pairs).
template <class Index>
struct BlockSelectRoomOf {
  Index* left;   // [n]: where the left scan stops, ascending
  Index* right;  // [n]: where the right scan stops, descending
};
using BlockSelectRoom = BlockSelectRoomOf<int32_t>;

namespace block_select_detail {

using torch_select::Scored;

// torch_select::partition_around(pairs + first, pairs + last, pairs + pivot) by the block; every
// thread returns the cut (an index into pairs). Each warp lists the stops of its own contiguous
// segment of the range with ballots (a count pass, a scan of the 32 warp totals, a write pass), so
// a partition waits at four block barriers whatever its length: a block-wide scan per 1024
// elements put three barriers on every step of the old form, and the decode row's 16,384
// entries took about 50 of them per partition (docs/cuda-backend.md).
template <class Index>
__device__ inline int64_t partition(Scored* pairs, int64_t first, int64_t last, int64_t pivot,
                                    const BlockSelectRoomOf<Index>& room) {
  __shared__ int64_t cut_s;
  __shared__ int swaps_s;
  __shared__ int64_t left_from[32], right_from[32];  // each warp's first list position
  __shared__ int64_t n_left_s, n_right_s;
  const Scored p = pairs[pivot];
  const int64_t len = last - first;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // Left stops counted from `first` upwards, right stops from `last - 1` downwards: position i of
  // the scan is element first + i for the left list and last - 1 - i for the right one.
  // (32-bit: a 64-bit division is a long instruction sequence, run by every thread.)
  const int64_t seg =
      (static_cast<int64_t>((static_cast<uint32_t>(len) + warps - 1) / warps) + 31) / 32 * 32;
  const int64_t i0 = static_cast<int64_t>(warp) * seg, i1 = lmin(len, i0 + seg);
  const auto stops = [&](int64_t i, bool& stop_l, bool& stop_r) {
    const bool in = i < i1;
    stop_l = in && !torch_select::before(pairs[first + i], p);
    stop_r = in && !torch_select::before(p, pairs[last - 1 - i]);
  };
  int64_t count_l = 0, count_r = 0;
  for (int64_t base = i0; base < i1; base += 32) {  // uniform over the warp
    bool stop_l, stop_r;
    stops(base + lane, stop_l, stop_r);
    count_l += __popc(__ballot_sync(kFullMask, stop_l));
    count_r += __popc(__ballot_sync(kFullMask, stop_r));
  }
  if (lane == 0) {
    left_from[warp] = count_l;
    right_from[warp] = count_r;
  }
  __syncthreads();
  if (warp == 0) {  // exclusive sums of the warp counts, in warp order
    int64_t l = lane < warps ? left_from[lane] : 0, r = lane < warps ? right_from[lane] : 0;
    const int64_t own_l = l, own_r = r;
    for (unsigned o = 1; o < 32; o <<= 1) {
      const int64_t yl = __shfl_up_sync(kFullMask, l, o), yr = __shfl_up_sync(kFullMask, r, o);
      if (lane >= o) l += yl, r += yr;
    }
    if (lane < warps) {
      left_from[lane] = l - own_l;
      right_from[lane] = r - own_r;
    }
    if (lane == warps - 1) {
      n_left_s = l;
      n_right_s = r;
    }
  }
  __syncthreads();
  int64_t at_l = left_from[warp], at_r = right_from[warp];
  const unsigned lower = (1u << lane) - 1u;
  for (int64_t base = i0; base < i1; base += 32) {
    const int64_t i = base + lane;
    bool stop_l, stop_r;
    stops(i, stop_l, stop_r);
    const unsigned mask_l = __ballot_sync(kFullMask, stop_l),
                   mask_r = __ballot_sync(kFullMask, stop_r);
    if (stop_l) room.left[at_l + __popc(mask_l & lower)] = static_cast<Index>(first + i);
    if (stop_r) room.right[at_r + __popc(mask_r & lower)] = static_cast<Index>(last - 1 - i);
    at_l += __popc(mask_l);
    at_r += __popc(mask_r);
  }
  const int64_t n_left = n_left_s, n_right = n_right_s;
  __syncthreads();
  // Swap j happens while left[j] < right[j]; left ascends and right descends, so those j are a
  // prefix: its length (the number of swaps) by a search on the first warp, 32 probes a round
  // (a binary search on one thread waited on ~14 dependent shared-memory loads a partition).
  if (warp == 0) {
    int64_t lo = 0, hi = lmin(n_left, n_right);  // the first j with left[j] >= right[j]
    while (lo < hi) {                            // uniform over the warp
      const int64_t step = (hi - lo + 31) / 32, j = lo + lane * step;
      const bool met = j < hi && room.left[j] >= room.right[j];
      const unsigned mask = __ballot_sync(kFullMask, met);
      if (mask == 0) {
        lo += lmin(31, (hi - 1 - lo) / step) * step + 1;  // past the last probe
      } else {
        const int hit = __ffs(mask) - 1;
        hi = lo + hit * step;  // a probe that met; the ones before it did not
        if (hit > 0) lo += (hit - 1) * step + 1;
      }
    }
    if (lane == 0) {
      const int64_t swaps = lo;
      // The scans meet where the left one stops after the last swap: at its next stop, or at the
      // element the last swap moved to the right side (a left stop), whichever comes first.
      const int64_t next_left = swaps < n_left ? room.left[swaps] : last;
      cut_s = swaps > 0 ? lmin(next_left, room.right[swaps - 1]) : next_left;
      swaps_s = static_cast<int>(swaps);
    }
  }
  __syncthreads();
  const int64_t cut = cut_s;
  for (int64_t j = threadIdx.x; j < swaps_s; j += blockDim.x)
    torch_select::swap(pairs + room.left[j], pairs + room.right[j]);
  __syncthreads();
  return cut;
}

// torch_select::heap_select(pairs + first, pairs + middle, pairs + last) by the block.
__device__ inline void heap_select(Scored* pairs, int64_t first, int64_t middle, int64_t last,
                                   int* warp_totals) {
  __shared__ int32_t may_enter[kHeapChunkPerThread * 1024];
  __shared__ int listed_s;
  if (threadIdx.x == 0) torch_select::make_heap(pairs + first, pairs + middle);
  __syncthreads();
  const int64_t chunk = kHeapChunkPerThread * static_cast<int64_t>(blockDim.x);
  for (int64_t base = middle; base < last; base += chunk) {
    const Scored top = pairs[first];
    int listed = 0;
    for (int part = 0; part < kHeapChunkPerThread; ++part) {  // index order: part, then thread
      const int64_t i = base + part * static_cast<int64_t>(blockDim.x) + threadIdx.x;
      const int enters = i < last && torch_select::before(pairs[i], top);
      int total = 0;
      const int pos = block_exclusive_scan(enters, warp_totals, &total);
      if (enters) may_enter[listed + pos] = static_cast<int32_t>(i);
      listed += total;
    }
    if (threadIdx.x == 0) listed_s = listed;
    __syncthreads();
    if (threadIdx.x == 0)
      for (int j = 0; j < listed_s; ++j) {
        Scored* x = pairs + may_enter[j];
        if (torch_select::before(*x, pairs[first]))
          torch_select::pop_to(pairs + first, pairs + middle, x);
      }
    __syncthreads();
  }
}

}  // namespace block_select_detail

// Called by every thread of the block (blockDim.x a multiple of 32, at most 1024): permutes
// pairs[0, n) so that its first k are the pairs torch_select::select(pairs, n, k, false) puts
// there (the same arrangement, except that the heap-select case skips the final heap sort,
// which only orders the first k). `warp_totals`: blockDim.x / 32 ints of shared memory.
template <class Index>
__device__ inline void block_torch_select(torch_select::Scored* pairs, int64_t n, int64_t k,
                                          const BlockSelectRoomOf<Index>& room, int* warp_totals) {
  namespace d = block_select_detail;
  if (k <= 0) return;
  if (k * 64 <= n) {
    d::heap_select(pairs, 0, k, n, warp_totals);
    return;
  }
  const int64_t nth = k - 1;  // < n
  int64_t first = 0, last = n, depth = torch_select::floor_log2(n) * 2;
  while (last - first > 3) {
    if (depth == 0) {
      d::heap_select(pairs, first, nth + 1, last, warp_totals);
      if (threadIdx.x == 0) torch_select::swap(pairs + first, pairs + nth);
      __syncthreads();
      return;
    }
    --depth;
    if (threadIdx.x == 0) {
      const int64_t mid = first + (last - first) / 2;
      torch_select::move_median_to_first(pairs + first, pairs + first + 1, pairs + mid,
                                         pairs + last - 1);
    }
    __syncthreads();
    const int64_t cut = d::partition(pairs, first + 1, last, first, room);
    if (cut <= nth)
      first = cut;
    else
      last = cut;
  }
  if (threadIdx.x == 0) torch_select::insertion_sort(pairs + first, pairs + last);
  __syncthreads();
}

}  // namespace flashdesk::cuda
