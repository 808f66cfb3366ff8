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
//     starts cannot enter during that chunk; the block tests a chunk at once (one scan lists
//     those that may enter, in index order) and one thread or one warp runs their heap steps,
//     on the heap in place or copied into shared memory (HeapSteps, BlockSelectRoomOf::heap).
//     The steps stay serial; make_heap runs a level's parents at once.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/heap_steps.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/no_padding.h"
#include "engine/ops/cuda/warp_roles.cuh"
#include "engine/util/torch_select.h"

namespace flashdesk::cuda {

constexpr int kHeapChunkPerThread = 4;  // elements each thread tests per heap-select chunk
// Pairs of shared memory a kernel gives the heap select's copy of the heap
// (BlockSelectRoomOf::heap, HeapSteps Warp or Thread): the indexer's heaps are its top 512 entries
// and, at a 1M context, its 2,048 candidate blocks.
constexpr int64_t kHeapRoomPairs = 2048;

// That room, in the shared memory of each kernel that calls this.
__device__ __forceinline__ torch_select::Scored* heap_room() {
  __shared__ torch_select::Scored room[kHeapRoomPairs];
  return room;
}
// A partition's range is spread over as many threads as give each about this many elements (at
// most 32, one bit mask a thread; a warp at least, the block at most): a small range on few
// threads waits at cheaper barriers.
constexpr int kPartitionPerThread = 16;

// Which forms of the selection's steps run (the backend's settings; all give torch's
// arrangement): partitions by the whole block or over runs on fewer threads as ranges shrink
// (partition_runs), and the heap select's steps (HeapSteps). A kernel parameter (the indexer's
// TieScratch, torch_select_rows), so its padding is spelled out and zero (no_padding.h): left
// implicit, its seven bytes held whatever the host's stack did, and a step graph compares
// parameters by their bytes: a change that only moved the stack stopped every replay of the
// every-role model at the indexer's selection (thirty-third session).
FD_NO_PADDING_BEGIN
struct SelectForm {
  int64_t partition_per_thread = 0;  // > 0: partitions over runs of about that many elements
  HeapSteps heap_steps = HeapSteps::InPlace;
  // With the whole block's partitions: ranges of at most kWarpTail elements on the first warp
  // alone (partition_runs on 32 threads), past the block's barriers.
  uint8_t warp_tail = 0;
  // With the whole block's partitions: each warp's stop masks of its count pass kept in its
  // lanes' registers for the write pass (partition()'s second pass then shuffles them instead of
  // loading and comparing its elements again), where a warp's segment has at most 32 rounds.
  uint8_t stop_masks = 0;
  uint8_t padding[5] = {};
};
FD_NO_PADDING_END
// The form of the backend's settings (CudaBackend::select_runs, heap_steps, select_warp_tail,
// select_stop_masks).
inline SelectForm select_form(bool runs, HeapSteps heap_steps, bool warp_tail, bool stop_masks) {
  return SelectForm{runs ? kPartitionPerThread : 0, heap_steps,
                    static_cast<uint8_t>(warp_tail && !runs ? 1 : 0),
                    static_cast<uint8_t>(stop_masks ? 1 : 0)};
}
// The longest range SelectForm::warp_tail gives the first warp (16 elements a lane): a
// partition's cost is its block's barriers and the first thread's steps, not its elements, up to
// a few hundred (twenty-fifth session's probe: 2,750-3,100 cycles each; ranges of at most 512 on
// one warp took a 16,385-entry row's selection from 94,000 cycles to 78,500).
constexpr int64_t kWarpTail = 512;

// A block's working room: two index lists as long as the row, in global memory (int32) or, for
// rows of at most 65,536 pairs, in shared memory (uint16: half the room, so a V4.1 decode row of
// 16,384 entries fits beside its pairs).
template <class Index>
struct BlockSelectRoomOf {
  Index* left;   // [n]: where the left scan stops, ascending
  Index* right;  // [n]: where the right scan stops, descending
  // Shared memory for the heap select's copy of the heap (heap_len pairs), or none: the heap
  // works in place.
  torch_select::Scored* heap = nullptr;
  int64_t heap_len = 0;
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
                                    const BlockSelectRoomOf<Index>& room, bool stop_masks) {
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
  // SelectForm::stop_masks: lane r keeps round r's two ballots (seg is the same for every warp,
  // so the choice is uniform over the block).
  const bool keep = stop_masks && seg <= 32 * 32;
  unsigned kept_l = 0, kept_r = 0;
  int64_t count_l = 0, count_r = 0;
  for (int64_t base = i0; base < i1; base += 32) {  // uniform over the warp
    bool stop_l, stop_r;
    stops(base + lane, stop_l, stop_r);
    const unsigned mask_l = __ballot_sync(kFullMask, stop_l),
                   mask_r = __ballot_sync(kFullMask, stop_r);
    if (keep && lane == static_cast<unsigned>((base - i0) >> 5)) kept_l = mask_l, kept_r = mask_r;
    count_l += __popc(mask_l);
    count_r += __popc(mask_r);
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
    unsigned mask_l, mask_r;
    if (keep) {
      const int round = static_cast<int>((base - i0) >> 5);
      mask_l = __shfl_sync(kFullMask, kept_l, round);
      mask_r = __shfl_sync(kFullMask, kept_r, round);
      stop_l = (mask_l >> lane) & 1u;
      stop_r = (mask_r >> lane) & 1u;
    } else {
      stops(i, stop_l, stop_r);
      mask_l = __ballot_sync(kFullMask, stop_l);
      mask_r = __ballot_sync(kFullMask, stop_r);
    }
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

// The barrier of the block's first `threads` threads (a multiple of 32): the block's own, a
// warp's, or named barrier 1.
__device__ __forceinline__ void sync_first(unsigned threads) {
  if (threads == blockDim.x)
    __syncthreads();
  else if (threads == 32)
    __syncwarp();
  else
    named_barrier_sync(1, threads);
}

// Exclusive sums over the first `threads` threads of two counts, and their totals. Every warp
// scans the warps' totals itself, so one barrier is enough; `totals` is reused by the next call
// only after later barriers.
__device__ inline void exclusive_scan_two(int a, int b, unsigned threads, int (*totals)[32],
                                          int& before_a, int& before_b, int& total_a,
                                          int& total_b) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = threads >> 5;
  int xa = a, xb = b;  // inclusive within the warp
  for (unsigned o = 1; o < 32; o <<= 1) {
    const int ya = __shfl_up_sync(kFullMask, xa, o), yb = __shfl_up_sync(kFullMask, xb, o);
    if (lane >= o) xa += ya, xb += yb;
  }
  if (warps == 1) {
    before_a = xa - a;
    before_b = xb - b;
    total_a = __shfl_sync(kFullMask, xa, 31);
    total_b = __shfl_sync(kFullMask, xb, 31);
    return;
  }
  if (lane == 31) {
    totals[0][warp] = xa;
    totals[1][warp] = xb;
  }
  sync_first(threads);
  int wa = lane < warps ? totals[0][lane] : 0, wb = lane < warps ? totals[1][lane] : 0;
  for (unsigned o = 1; o < 32; o <<= 1) {
    const int ya = __shfl_up_sync(kFullMask, wa, o), yb = __shfl_up_sync(kFullMask, wb, o);
    if (lane >= o) wa += ya, wb += yb;
  }
  const int from_a = __shfl_sync(kFullMask, wa, (warp + 31) & 31u),
            from_b = __shfl_sync(kFullMask, wb, (warp + 31) & 31u);
  before_a = (warp > 0 ? from_a : 0) + xa - a;
  before_b = (warp > 0 ? from_b : 0) + xb - b;
  total_a = __shfl_sync(kFullMask, wa, warps - 1);
  total_b = __shfl_sync(kFullMask, wb, warps - 1);
}

// partition()'s result (the same swaps, the same cut) by the first `threads` threads, each with a
// contiguous run of at most 32 elements whose stops it keeps as two bit masks: the stop lists'
// positions come from one scan of the runs' counts. With F(m) the left stops in [first, m) and
// G(m) the right stops in [m, last), swap j (from 1) happens iff the j-th left stop lies before
// the j-th right stop, iff min(F(m), G(m)) >= j for some m: the swaps are max_m min(F(m), G(m)),
// found in the run where F crosses G. No ballots, list writes for the swapped stops only, and
// four barriers of `threads` threads (partition() waits at five of the whole block's).
template <class Index>
__device__ inline int64_t partition_runs(Scored* pairs, int64_t first, int64_t last, int64_t pivot,
                                         const BlockSelectRoomOf<Index>& room, unsigned threads) {
  __shared__ int totals[2][32];
  __shared__ int swaps_s;
  __shared__ int64_t next_left_s;  // the first left stop after the swapped ones
  const Scored p = pairs[pivot];
  const int len = static_cast<int>(last - first);  // <= 32 * threads
  const int run = (len + static_cast<int>(threads) - 1) / static_cast<int>(threads);
  const int i0 = static_cast<int>(lmin(len, static_cast<int64_t>(threadIdx.x) * run));
  const int n = static_cast<int>(lmin(len - i0, run));
  uint32_t stop_l = 0, stop_r = 0;
  for (int u = 0; u < n; ++u) {
    const Scored x = pairs[first + i0 + u];
    stop_l |= static_cast<uint32_t>(!torch_select::before(x, p)) << u;
    stop_r |= static_cast<uint32_t>(!torch_select::before(p, x)) << u;
  }
  if (threadIdx.x == 0) {
    swaps_s = 0;
    next_left_s = last;
  }
  if (threads == 32) __syncwarp();  // (more threads: the scan's barrier orders these)
  int before_l, before_r, total_l, total_r;
  exclusive_scan_two(__popc(stop_l), __popc(stop_r), threads, totals, before_l, before_r, total_l,
                     total_r);
  // min(F, G) over this run's m = first + i0 .. first + i0 + n: F rises and G falls, so it is F's
  // end value where F stays below G, G's start value where F starts above it, else walked.
  const int f0 = before_l, g0 = total_r - before_r;
  const int f1 = f0 + __popc(stop_l), g1 = g0 - __popc(stop_r);
  int best;
  if (f1 <= g1) {
    best = f1;
  } else if (f0 >= g0) {
    best = g0;
  } else {
    int f = f0, g = g0;
    best = f < g ? f : g;
    for (int u = 0; u < n; ++u) {
      f += (stop_l >> u) & 1u;
      g -= (stop_r >> u) & 1u;
      const int h = f < g ? f : g;
      if (h > best) best = h;
    }
  }
  if (best > 0) atomicMax(&swaps_s, best);
  sync_first(threads);
  const int swaps = swaps_s;
  // The lists' first `swaps` entries: left stop of rank r at room.left[r], right stop of rank r
  // from the right at room.right[r].
  int seen_l = 0, seen_r = 0;
  for (int u = 0; u < n; ++u) {
    const int64_t at = first + i0 + u;
    if ((stop_l >> u) & 1u) {
      const int r = before_l + seen_l++;
      if (r < swaps)
        room.left[r] = static_cast<Index>(at);
      else if (r == swaps)
        next_left_s = at;
    }
    if ((stop_r >> u) & 1u) {
      const int r = g0 - ++seen_r;
      if (r < swaps) room.right[r] = static_cast<Index>(at);
    }
  }
  sync_first(threads);
  const int64_t next_left = next_left_s;
  const int64_t cut =
      swaps > 0 ? lmin(next_left, static_cast<int64_t>(room.right[swaps - 1])) : next_left;
  for (int j = static_cast<int>(threadIdx.x); j < swaps; j += static_cast<int>(threads))
    torch_select::swap(pairs + room.left[j], pairs + room.right[j]);
  sync_first(threads);
  return cut;
}

// The threads a partition of `len` elements runs on (see kPartitionPerThread).
__device__ __forceinline__ unsigned partition_threads(int64_t len, int64_t per_thread) {
  const int64_t want = ((len + per_thread - 1) / per_thread + 31) / 32 * 32;
  return static_cast<unsigned>(lmin(static_cast<int64_t>(blockDim.x), lmax(int64_t{32}, want)));
}

// Where sift_down's hole moves from node h of a heap of `len`: the child that is not before the
// other (the right one at a tie), the single left child of the last inner node of an even-sized
// heap, or -1 at a leaf (torch_select::sift_down's steps).
__device__ __forceinline__ int hole_step(const Scored* heap, int len, int h) {
  if (h < (len - 1) / 2) {
    const int right = 2 * (h + 1);
    return torch_select::before(heap[right], heap[right - 1]) ? right - 1 : right;
  }
  if ((len & 1) == 0 && h == (len - 2) / 2) return 2 * h + 1;
  return -1;
}

// Node j (level order, 0 the root) of the subtree at `root`.
__device__ __forceinline__ int subtree_node(int root, int j) {
  const int level = 31 - __clz(j + 1);
  return ((root + 1) << level) - 1 + (j - ((1 << level) - 1));
}

// torch_select::pop_to for a heap in shared memory by one warp (every lane calls it), `value`
// being *result (the caller has it in registers); returns the heap's new top. The hole's path
// p_0 = 0 .. p_D is found six levels a round: lane j takes nodes j and j + 32 of the 63-node
// subtree at the round's first node, both hole steps' loads in flight together, and two ballots
// (a leaf, a right step) give every lane the path through the subtree without a shuffle. sift_down
// moves the path's values o_1 .. o_D up a node and push_up moves value up from p_D past the
// parents it is not before; so with t* the last t < D where o_{t+1} is not before value (-1 if
// none), p_0 .. p_t* take o_1 .. o_{t*+1}, p_{t*+1} takes value, the nodes below keep their own,
// and *result takes o_0: the same writes, a warp's loads at once instead of a thread's dependent
// ones. (Two rounds for heaps of up to 4,095 pairs: the indexer's 512 and 2,048. Node numbers
// in 32 bits: the heap is the shared room's, and a step is a chain of dependent instructions
// that 64-bit arithmetic makes longer.)
__device__ inline Scored warp_pop_to(Scored* heap, int len, Scored value, Scored* result) {
  const unsigned lane = threadIdx.x & 31u;
  int path_node = -1;  // lane t: p_t
  int depth = 0;       // path nodes found (uniform)
  for (int root = 0;;) {
    const int node_a = subtree_node(root, static_cast<int>(lane));
    const int node_b = lane < 31 ? subtree_node(root, static_cast<int>(lane) + 32) : len;
    const int step_a = node_a < len ? hole_step(heap, len, node_a) : -1;
    const int step_b = node_b < len ? hole_step(heap, len, node_b) : -1;
    const uint64_t leaf = __ballot_sync(kFullMask, step_a < 0) |
                          static_cast<uint64_t>(__ballot_sync(kFullMask, step_b < 0)) << 32;
    const uint64_t right = __ballot_sync(kFullMask, step_a == 2 * node_a + 2) |
                           static_cast<uint64_t>(__ballot_sync(kFullMask, step_b == 2 * node_b + 2))
                               << 32;
    int at = root;
    int j = 0;  // at's number in the subtree
    bool ended = false;
    for (int s = 0; s < 6; ++s) {
      if (static_cast<int>(lane) == depth) path_node = at;
      ++depth;
      if ((leaf >> j) & 1u) {
        ended = true;
        break;
      }
      const int r = static_cast<int>((right >> j) & 1u);
      j = 2 * j + 1 + r;
      at = 2 * at + 1 + r;
    }
    if (ended) break;
    root = at;  // the subtree's seventh level: the next round's first node
  }
  const int D = depth - 1;
  Scored own{0.0f, 0};
  if (static_cast<int>(lane) <= D) own = heap[path_node];
  const float below_value = __shfl_down_sync(kFullMask, own.value, 1);
  const int32_t below_index = __shfl_down_sync(kFullMask, own.index, 1);
  const Scored below{below_value, below_index};  // lane t: o_{t+1}
  const unsigned stops =
      __ballot_sync(kFullMask, static_cast<int>(lane) < D && !torch_select::before(below, value));
  const int last_stop = stops ? 31 - __clz(static_cast<int>(stops)) : -1;  // t*
  __syncwarp();
  if (lane == 0 && result) *result = own;
  if (static_cast<int>(lane) <= last_stop) heap[path_node] = below;
  if (static_cast<int>(lane) == last_stop + 1) heap[path_node] = value;
  __syncwarp();
  // The new top: o_1 where the path moved up, else value.
  const Scored first_below{__shfl_sync(kFullMask, below_value, 0),
                           __shfl_sync(kFullMask, below_index, 0)};
  return last_stop >= 0 ? first_below : value;
}

// The row a heap select reads: pairs in memory, whose slots take the heap's evicted tops as
// torch's do (PairRow), or the values themselves with their indices, nothing written back
// (ValueRow: a caller that only needs the first k reads a row of floats once instead of writing
// and reading pairs twice its size).
struct PairRow {
  Scored* pairs;
  __device__ Scored at(int64_t i) const { return pairs[i]; }
  __device__ Scored* slot(int64_t i) const { return pairs + i; }
};
struct ValueRow {
  const float* vals;
  __device__ Scored at(int64_t i) const { return Scored{vals[i], static_cast<int32_t>(i)}; }
  __device__ Scored* slot(int64_t) const { return nullptr; }
};

// The heap steps of the listed candidates (offsets from `base`, in index order) by one warp:
// each that is before the heap's top replaces it (warp_pop_to). The candidates are read 32 at a
// time, one a lane, and tested in order from registers: a step writes only its own candidate's
// slot and the heap, so the later ones read before it are still theirs.
template <class Row>
__device__ inline void warp_heap_steps(Scored* heap, int len, const Row& row, int64_t base,
                                       const uint16_t* listed, int n_listed) {
  const unsigned lane = threadIdx.x & 31u;
  Scored top = heap[0];
  for (int j0 = 0; j0 < n_listed; j0 += 32) {  // uniform over the warp
    const int j = j0 + static_cast<int>(lane);
    const int at = j < n_listed ? listed[j] : 0;
    const Scored mine = j < n_listed ? row.at(base + at) : Scored{0.0f, 0};
    const int count = n_listed - j0 < 32 ? n_listed - j0 : 32;
    for (int u = 0; u < count; ++u) {
      const Scored x{__shfl_sync(kFullMask, mine.value, u), __shfl_sync(kFullMask, mine.index, u)};
      if (!torch_select::before(x, top)) continue;
      top = warp_pop_to(heap, len, x, row.slot(base + __shfl_sync(kFullMask, at, u)));
    }
  }
}

// torch_select::pop_to's sift (std::__adjust_heap, then push_up) on a heap in shared memory, in
// 32-bit node numbers, by one thread. The hole's walk down is a chain of dependent steps (about
// eleven for the indexer's 2,048 pairs), so each step loads the four grandchildren of the hole
// while it compares the two children loaded a step before: a step waits on its compare, not on a
// load (with a load's latency in every step, the thread's sift measured only as fast as a warp's
// steps, twenty-eighth session).
__device__ __forceinline__ void thread_sift_down(Scored* heap, int len, Scored value) {
  const int two_children = (len - 1) / 2;  // holes below this have two children
  int hole = 0;
  Scored left{}, right{};
  if (hole < two_children) {
    left = heap[1];
    right = heap[2];
  }
  while (hole < two_children) {
    const int r = 2 * hole + 2;  // the right child; the left is r - 1
    // The grandchildren: the left child's at 2r - 1, 2r, the right's at 2r + 1, 2r + 2 (read
    // only where the heap has them; the walk reads them only where the child has two).
    Scored g[4];
    FD_UNROLL
    for (int u = 0; u < 4; ++u) g[u] = 2 * r - 1 + u < len ? heap[2 * r - 1 + u] : Scored{};
    const bool go_left = torch_select::before(right, left);
    heap[hole] = go_left ? left : right;
    hole = go_left ? r - 1 : r;
    left = go_left ? g[0] : g[2];
    right = go_left ? g[1] : g[3];
  }
  if ((len & 1) == 0 && hole == (len - 2) / 2) {  // an even heap's last inner node: one child
    heap[hole] = heap[2 * hole + 1];
    hole = 2 * hole + 1;
  }
  int parent = (hole - 1) / 2;
  while (hole > 0) {
    const Scored p = heap[parent];
    if (!torch_select::before(p, value)) break;
    heap[hole] = p;
    hole = parent;
    parent = (hole - 1) / 2;
  }
  heap[hole] = value;
}

// The heap steps of the listed candidates (offsets from `base`, in index order) by one thread, the
// heap in shared memory: each that is before the top replaces it (torch_select::pop_to), the
// evicted top written to the candidate's slot where the row has slots. The candidates are read
// eight ahead, so their loads wait while the steps run.
template <class Row>
__device__ inline void thread_heap_steps(Scored* heap, int len, const Row& row, int64_t base,
                                         const uint16_t* listed, int n_listed) {
  constexpr int kAhead = 8;
  Scored top = heap[0];
  for (int j0 = 0; j0 < n_listed; j0 += kAhead) {
    Scored x[kAhead];
    FD_UNROLL
    for (int u = 0; u < kAhead; ++u) x[u] = j0 + u < n_listed ? row.at(base + listed[j0 + u]) : top;
    FD_UNROLL
    for (int u = 0; u < kAhead; ++u) {
      if (!torch_select::before(x[u], top)) continue;  // (past the list: x is top)
      if (Scored* slot = row.slot(base + listed[j0 + u])) *slot = top;
      thread_sift_down(heap, len, x[u]);
      top = heap[0];
    }
  }
}

// torch_select::make_heap(heap, heap + len) by the block: make_heap sifts the parents down from
// the last to the root, and a parent's sift touches only its own subtree, so the parents of one
// level (disjoint subtrees, each level done before the one above it) sift at once.
__device__ inline void block_make_heap(Scored* heap, int64_t len) {
  if (len < 2) return;
  const int64_t last_parent = (len - 2) / 2;
  for (int64_t level = torch_select::floor_log2(last_parent + 1); level >= 0; --level) {
    const int64_t lo = (int64_t{1} << level) - 1, hi = lmin(2 * lo + 1, last_parent + 1);
    for (int64_t p = lo + threadIdx.x; p < hi; p += blockDim.x)
      torch_select::sift_down(heap, p, len, heap[p]);
    __syncthreads();
  }
}

// torch_select::heap_select(first, middle, last) over `row` by the block. With HeapSteps Warp or
// Thread the heap (`middle - first` pairs) works in `room` (the caller's shared memory, room_len
// pairs) where it fits: a heap step's loads then wait on shared memory, not on L2 (ten of them a
// step, a few thousand steps a long-context decode row). Else one thread's steps on the heap in
// place (a PairRow only). A PairRow's heap ends in its slots [first, middle); with a ValueRow it
// stays in `room`.
template <class Row>
__device__ inline void heap_select(const Row& row, int64_t first, int64_t middle, int64_t last,
                                   int* warp_totals, HeapSteps steps, Scored* room,
                                   int64_t room_len) {
  __shared__ uint16_t may_enter[kHeapChunkPerThread * 1024];  // offsets into the chunk
  const int64_t len = middle - first;
  const bool in_room = steps != HeapSteps::InPlace && room != nullptr && len <= room_len;
  Scored* heap = row.slot(first);
  if (in_room) {
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) room[i] = row.at(first + i);
    __syncthreads();
    heap = room;
  }
  block_make_heap(heap, len);
  // The chunk's elements are tested against the top it starts with: the top only moves to
  // better values, so one not before it cannot enter during the chunk. Thread t tests the
  // chunk's elements 4t .. 4t + 3, so one block scan lists those that may, in index order.
  const int64_t chunk = kHeapChunkPerThread * static_cast<int64_t>(blockDim.x);
  for (int64_t base = middle; base < last; base += chunk) {
    const Scored top = heap[0];
    const int64_t mine = kHeapChunkPerThread * static_cast<int64_t>(threadIdx.x);
    Scored x[kHeapChunkPerThread];
    FD_UNROLL
    for (int u = 0; u < kHeapChunkPerThread; ++u)
      x[u] = base + mine + u < last ? row.at(base + mine + u) : top;
    unsigned enters = 0;
    FD_UNROLL
    for (int u = 0; u < kHeapChunkPerThread; ++u)
      enters |= static_cast<unsigned>(torch_select::before(x[u], top)) << u;
    int listed = 0;
    int at = block_exclusive_scan(__popc(enters), warp_totals, &listed);
    FD_UNROLL
    for (int u = 0; u < kHeapChunkPerThread; ++u)
      if ((enters >> u) & 1u) may_enter[at++] = static_cast<uint16_t>(mine + u);
    __syncthreads();
    if (in_room && steps == HeapSteps::Warp && threadIdx.x < 32)
      warp_heap_steps(heap, static_cast<int>(len), row, base, may_enter, listed);
    else if (in_room && threadIdx.x == 0)
      thread_heap_steps(heap, static_cast<int>(len), row, base, may_enter, listed);
    else if (!in_room && threadIdx.x == 0)
      for (int j = 0; j < listed; ++j) {
        Scored* y = row.slot(base + may_enter[j]);
        if (torch_select::before(*y, heap[0])) torch_select::pop_to(heap, heap + len, y);
      }
    __syncthreads();
  }
  if (in_room && row.slot(first) != nullptr) {
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) *row.slot(first + i) = room[i];
    __syncthreads();
  }
}

}  // namespace block_select_detail

// Whether block_heap_select_values takes a row of n values for its k best: torch heap-selects
// there (64 k <= n), the form's steps work on a copy of the heap and it fits the room.
template <class Index>
__device__ inline bool heap_selects_values(int64_t n, int64_t k,
                                           const BlockSelectRoomOf<Index>& room, SelectForm form) {
  return k > 0 && k * 64 <= n && form.heap_steps != HeapSteps::InPlace && room.heap != nullptr &&
         k <= room.heap_len;
}

// torch_select::select(pairs, n, k, false)'s first k pairs (in the heap's order) for the pairs
// (vals[i], i), left in room.heap[0, k), read straight from the values: no pairs in memory. Called
// by every thread of the block where heap_selects_values holds.
template <class Index>
__device__ inline void block_heap_select_values(const float* vals, int64_t n, int64_t k,
                                                const BlockSelectRoomOf<Index>& room,
                                                int* warp_totals, SelectForm form) {
  block_select_detail::heap_select(block_select_detail::ValueRow{vals}, 0, k, n, warp_totals,
                                   form.heap_steps, room.heap, room.heap_len);
}

// Called by every thread of the block (blockDim.x a multiple of 32, at most 1024): permutes
// pairs[0, n) so that its first k are the pairs torch_select::select(pairs, n, k, false) puts
// there (the same arrangement, except that the heap-select case skips the final heap sort,
// which only orders the first k). `warp_totals`: blockDim.x / 32 ints of shared memory.
// `form`: which forms of the steps run (SelectForm).
template <class Index>
__device__ inline void block_torch_select(torch_select::Scored* pairs, int64_t n, int64_t k,
                                          const BlockSelectRoomOf<Index>& room, int* warp_totals,
                                          SelectForm form) {
  namespace d = block_select_detail;
  if (k <= 0) return;
  if (k * 64 <= n) {
    d::heap_select(d::PairRow{pairs}, 0, k, n, warp_totals, form.heap_steps, room.heap,
                   room.heap_len);
    return;
  }
  const int64_t nth = k - 1;  // < n
  const int64_t per_thread = form.partition_per_thread;
  __shared__ int64_t first_s, last_s;
  int64_t first = 0, last = n, depth = torch_select::floor_log2(n) * 2;
  // The ranges shrink, so the threads a partition takes never grow: a thread not needed by one
  // is not needed by any later, and waits below for the first thread's range.
  while (last - first > 3 && depth > 0) {
    const bool tail = per_thread <= 0 && form.warp_tail && last - first - 1 <= kWarpTail;
    const unsigned threads = per_thread > 0 ? d::partition_threads(last - first - 1, per_thread)
                             : tail         ? 32u
                                            : blockDim.x;
    if (threadIdx.x >= threads) break;
    --depth;
    if (threadIdx.x == 0) {
      const int64_t mid = first + (last - first) / 2;
      torch_select::move_median_to_first(pairs + first, pairs + first + 1, pairs + mid,
                                         pairs + last - 1);
    }
    d::sync_first(threads);
    const int64_t cut =
        (per_thread <= 0 && !tail) || last - first - 1 > 32 * static_cast<int64_t>(threads)
            ? d::partition(pairs, first + 1, last, first, room, form.stop_masks != 0)
            : d::partition_runs(pairs, first + 1, last, first, room, threads);
    if (cut <= nth)
      first = cut;
    else
      last = cut;
  }
  if (threadIdx.x == 0) {
    first_s = first;
    last_s = last;
  }
  __syncthreads();
  first = first_s;
  last = last_s;
  if (last - first > 3) {  // the depth limit: heap select by the whole block
    d::heap_select(d::PairRow{pairs}, first, nth + 1, last, warp_totals, form.heap_steps, room.heap,
                   room.heap_len);
    if (threadIdx.x == 0) torch_select::swap(pairs + first, pairs + nth);
    __syncthreads();
    return;
  }
  if (threadIdx.x == 0) torch_select::insertion_sort(pairs + first, pairs + last);
  __syncthreads();
}

}  // namespace flashdesk::cuda
