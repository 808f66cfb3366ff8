// The V4.1 indexer on the CUDA backend (MODEL-REFERENCE §3.6, docs/numerics.md "Indexer"):
//   scores: one thread per (query, entry): d_h = bf16(q_h . k) over the FP4 key, r_h =
//     bf16(relu(d_h) * w_h), score = bf16(sum_h r_h in head order), over a row of select_width
//     entries; entries not yet visible, past the cache or outside the Reindex restriction score
//     -inf (prefill-sized calls: indexer_tc.cu, the same scores on the tensor cores);
//   selection: one block per query: a radix select (four 8-bit digits of an order-preserving key,
//     two for rows of BF16 values) finds the k-th best score, over the row held in registers where
//     it fits (up to 18 entries a thread; wider rows are read from memory at each pass). When fewer
//     values equal it than are taken, the choice is plain and an ordered compaction writes the
//     entries above it and its equals, in ascending order. Otherwise torch's choice among the
//     equals is needed (docs/numerics.md "Top-k"): the block runs torch's selection step by step
//     (torch_select_block.cuh, in shared memory where the row fits) over the row and marks the
//     equals it takes, and the compaction takes those. The candidate blocks the same way over block
//     maxima.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/indexer_args.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/linear.cuh"
#include "engine/ops/cuda/no_padding.h"
#include "engine/ops/cuda/torch_select_block.cuh"
#include "engine/ops/kv_format.h"
#include "engine/util/torch_select.h"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kMaxIndexHeads = 64;
// 128 entries a block, four lanes each: the block's staging of q (16 KiB at V4.1's shapes) is
// paid once per 128 entries, as it was with one lane an entry (32 entries a block made a
// prefill's q staging four times the traffic).
constexpr int kScoreThreads = 512;
constexpr int kSelectThreads = 1024;

// Per selecting block: torch's selection's working row, its index lists and the marks of the
// equals it takes. The shared-memory kernel keeps the row and the lists in shared memory and
// uses only `taken` from here.
FD_NO_PADDING_BEGIN
struct TieScratch {
  torch_select::Scored* pairs;  // [rows, width]
  int32_t* lists;               // [rows, 2 * width]
  uint8_t* taken;               // [rows, width]
  SelectForm form;              // block_torch_select's steps
};
FD_NO_PADDING_END

// Shared memory a row of `width` takes in the shared-memory kernel: the pairs and two uint16
// index lists (12 bytes an entry: 192 KiB for a 16,384-entry decode row). The selection's
// partitions and binary searches then wait on shared memory instead of L2: it was a Full decode
// layer's largest kernel (docs/cuda-backend.md).
constexpr int64_t shared_select_bytes(int64_t width) {
  return width * static_cast<int64_t>(sizeof(torch_select::Scored) + 2 * sizeof(uint16_t));
}
// The kernels' static shared memory (the heap select's candidate list, histogram, scan totals)
// with room to spare; the dynamic part must fit beside it.
constexpr int64_t kSelectStaticSmem = 20 * 1024;

// A restriction's block list as an entry-block mask: allowed[t][b] = 1 for each listed block.
// sizes: as IdxArgs::sizes (n_blocks from it where set).
__global__ void restriction_mask_kernel(const int32_t* blocks, int64_t n, int64_t c,
                                        int64_t n_blocks, const int64_t* sizes, uint8_t* allowed) {
  FD_GRID_PROLOGUE();
  if (sizes) n_blocks = sizes[2];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int32_t b = blocks[i];
  if (b >= 0 && b < n_blocks) allowed[(i / c) * n_blocks + b] = 1;
}

// Four lanes score one entry, lane p taking heads p, p + 4, p + 8, ... (a quarter of the FMAs
// each: one lane per entry ran 4096 dependent-ish FMAs per thread on a quarter of the
// multiprocessors, 37 µs of a decode step's Full layer); the heads' terms are then gathered to
// the first lane in head order, so the sum is the one-lane sum to the bit. MaxHeads (32 or 64)
// bounds the unrolled head loops. Per lane: the entry's 16 code bytes of a 32-value block as four
// 4-byte loads where rows are 4-byte aligned (dim / 2 + dim / 32 bytes: dim a multiple of 128),
// else bytes; q from shared memory four floats at a time, its rows dim + 4 floats apart so the
// four lanes' heads sit on different banks.
constexpr int kLanesPerEntry = 4;

// Entries: entries a lane group takes (1, or 2: the block's second half of its entries, 128 on,
// so that each q load from shared memory feeds both entries' products and the block stages q once
// for 256 entries: CudaBackend::set_score_pairs_from). Each entry's sums are the one-entry
// kernel's.
template <int MaxHeads, int Entries>
__global__ void __launch_bounds__(kScoreThreads)
    indexer_scores_kernel(IdxArgs call, float* scores) {
  FD_GRID_PROLOGUE();
  const IdxArgs a = sized(call);
  constexpr int kPerLane = MaxHeads / kLanesPerEntry;
  FD_DYNAMIC_SMEM(float, qs);
  const int64_t t = blockIdx.y, q_stride = a.dim + 4;
  const int64_t visible = lmin(a.visible[t], a.entries);
  const int64_t group_entries = blockDim.x / kLanesPerEntry;  // entries of one lane group pass
  // A block past the visible entries (a decode row is as wide as the prompt's: most of it) only
  // writes -inf, without staging q.
  const int64_t block_first = static_cast<int64_t>(blockIdx.x) * group_entries * Entries;
  if (block_first >= visible) {
    for (int e = 0; e < Entries; ++e) {
      const int64_t s = block_first + e * group_entries + threadIdx.x;
      if (threadIdx.x < group_entries && s < a.width) scores[t * a.width + s] = -INFINITY;
    }
    return;
  }
  for (int64_t i = threadIdx.x; i < a.heads * a.dim; i += blockDim.x)
    qs[(i / a.dim) * q_stride + i % a.dim] = a.q[t * a.heads * a.dim + i];
  __syncthreads();
  const int part = static_cast<int>(threadIdx.x % kLanesPerEntry);
  int64_t s[Entries];
  bool live[Entries];
  FD_UNROLL
  for (int e = 0; e < Entries; ++e) {
    s[e] = block_first + e * group_entries + threadIdx.x / kLanesPerEntry;
    // Every lane stays to the end for the gather's shuffles.
    live[e] = s[e] < a.width && s[e] < visible &&
              !(a.allowed && !a.allowed[t * a.n_blocks + s[e] / a.block_size]);
  }
  float dh[Entries][kPerLane];
  FD_UNROLL
  for (int e = 0; e < Entries; ++e) FD_UNROLL
  for (int hh = 0; hh < kPerLane; ++hh) dh[e][hh] = 0.0f;
  bool any_live = false;
  FD_UNROLL
  for (int e = 0; e < Entries; ++e) any_live = any_live || live[e];
  if (any_live) {
    const int64_t row_bytes = a.dim / 2 + a.dim / 32;
    const bool words_aligned = row_bytes % 4 == 0;  // dim a multiple of 128 (the model's 128)
    for (int64_t j = 0; j < a.dim / 32; ++j) {
      float kv[Entries][32];
      FD_UNROLL
      for (int e = 0; e < Entries; ++e) {
        // A dead entry's products are computed from a live row's bytes and never used.
        const uint8_t* row = a.keys + (live[e] ? s[e] : s[0]) * row_bytes;
        const float scale = e8m0_to_f32(row[a.dim / 2 + j]);
        const uint8_t* codes = row + j * 16;
        uint32_t word[4];
        FD_UNROLL
        for (int w = 0; w < 4; ++w)
          word[w] = words_aligned
                        ? load_aligned<uint32_t>(codes + 4 * w)
                        : codes[4 * w] | (codes[4 * w + 1] << 8) | (codes[4 * w + 2] << 16) |
                              (uint32_t{codes[4 * w + 3]} << 24);
        FD_UNROLL
        for (int i = 0; i < 32; ++i)
          kv[e][i] = e2m1_to_f32((word[i / 8] >> (4 * (i % 8))) & 0xFu) * scale;
      }
      FD_UNROLL
      for (int hh = 0; hh < kPerLane; ++hh) {
        const int64_t h = hh * kLanesPerEntry + part;
        if (h < a.heads) {
          const float* qh = qs + h * q_stride + j * 32;
          float acc[Entries];
          FD_UNROLL
          for (int e = 0; e < Entries; ++e) acc[e] = dh[e][hh];
          FD_UNROLL
          for (int i = 0; i < 8; ++i) {
            const float4 q4 = load_aligned<float4>(qh + 4 * i);
            FD_UNROLL
            for (int e = 0; e < Entries; ++e) {
              acc[e] += q4.x * kv[e][4 * i];
              acc[e] += q4.y * kv[e][4 * i + 1];
              acc[e] += q4.z * kv[e][4 * i + 2];
              acc[e] += q4.w * kv[e][4 * i + 3];
            }
          }
          FD_UNROLL
          for (int e = 0; e < Entries; ++e) dh[e][hh] = acc[e];
        }
      }
    }
  }
  const int first_lane = static_cast<int>(threadIdx.x & 31u) & ~(kLanesPerEntry - 1);
  FD_UNROLL
  for (int e = 0; e < Entries; ++e) {
    float term[kPerLane];
    FD_UNROLL
    for (int hh = 0; hh < kPerLane; ++hh) {
      const int64_t h = hh * kLanesPerEntry + part;
      term[hh] = live[e] && h < a.heads
                     ? round_bf16(fmaxf(round_bf16(dh[e][hh]), 0.0f) * a.weights[t * a.heads + h])
                     : 0.0f;
    }
    float total = 0.0f;
    FD_UNROLL
    for (int h = 0; h < MaxHeads; ++h) {
      const float v =
          __shfl_sync(kFullMask, term[h / kLanesPerEntry], first_lane + h % kLanesPerEntry);
      if (h < a.heads) total += v;
    }
    if (part == 0 && s[e] < a.width)
      scores[t * a.width + s[e]] = live[e] ? round_bf16(total) : -INFINITY;
  }
}

// Larger float -> larger key; -0 and +0 share one key.
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// One step of the radix select, by the first warp: the highest digit whose count from the top
// reaches `remaining` (digit 0 at the latest). Each lane sums 8 digits from the top, a scan finds
// the lane, the lane its digit (one thread walking 256 digits cost more than the histogram).
// Writes the prefix with that digit, what remains to be taken among its values and, after the
// last digit (`last`), how many values equal the k-th best.
__device__ inline void pick_digit(const int* hist, int shift, bool last, uint32_t prefix,
                                  int remaining, uint32_t* prefix_s, int* remaining_s,
                                  int* equal_s) {
  const int lane = static_cast<int>(threadIdx.x);
  int local = 0;
  for (int v = 0; v < 8; ++v) local += hist[255 - 8 * lane - v];
  int upto = local;
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(kFullMask, upto, static_cast<unsigned>(o));
    if (lane >= o) upto += y;
  }
  const unsigned reach = __ballot_sync(kFullMask, upto >= remaining);
  const int first_lane = reach ? __ffs(reach) - 1 : 31;  // the lowest lane that reaches it
  if (lane == first_lane) {
    int above = upto - local, digit = 255 - 8 * lane;
    for (;; --digit) {
      if (digit == 0 || above + hist[digit] >= remaining) break;
      above += hist[digit];
    }
    *prefix_s = prefix | (static_cast<uint32_t>(digit) << shift);
    *remaining_s = remaining - above;
    if (last) *equal_s = hist[digit];
  }
}

// Adds each value's digit at `shift` to hist where its higher digits are `prefix` (under
// `mask`). Warp-aggregated: index scores tie often and share their high digits, and 32 lanes
// adding to one bin serialise; the lanes of one digit add their count once.
__device__ __forceinline__ void count_digit(bool valid, uint32_t key, uint32_t mask,
                                            uint32_t prefix, int shift, int* hist) {
  unsigned digit = 256u;  // none
  if (valid && (key & mask) == prefix) digit = (key >> shift) & 0xFFu;
  const unsigned same = __match_any_sync(kFullMask, digit);
  if (digit < 256u && (threadIdx.x & 31u) == static_cast<unsigned>(__ffs(same) - 1))
    atomicAdd(&hist[digit], __popc(same));
}

// Whether an order key is a BF16 value's (its low 16 bits fixed: 0, or all ones for a negative).
__device__ __forceinline__ bool bf16_key(uint32_t key) {
  return (key & 0xFFFFu) == ((key >> 31) ? 0u : 0xFFFFu);
}

// Values read from memory kStreamLoads at a time a thread, all in flight together (a long row's
// passes wait on L2, and one load an iteration left most of that wait exposed).
constexpr int kStreamLoads = 8;

// The order keys of values base + u * blockDim.x + threadIdx.x (u < kStreamLoads), 0 past the
// row: a thread's part of one pass over a row, its loads all in flight together.
__device__ __forceinline__ void stream_keys(const float* vals, int64_t count, int64_t base,
                                            uint32_t (&key)[kStreamLoads]) {
  FD_UNROLL
  for (int u = 0; u < kStreamLoads; ++u) {
    const int64_t i = base + u * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    key[u] = i < count ? order_key(vals[i]) : 0u;
  }
}

// Whether torch's choice among the equals of the k-th best can change a row's output, given
// whether this thread saw one below the limit (called by every thread, where the row ties and
// its limit is inside it). Equals from the limit on are published as -1, after every entry below
// it (the output is in index order), so which of them torch takes cannot show: the first in index
// order stand in for them. A prompt's row whose visible entries are fewer than k ties at -inf
// past its limit only (511 of an 8K-token prompt's rows at ratio 1, 1,023 at ratio 2), and then
// skips torch's selection.
__device__ __forceinline__ bool equals_below_limit(bool mine) {
  return __syncthreads_or(mine) != 0;
}

// out[0, out_len) = the k best of vals[0, count) as torch.topk chooses them, in ascending index
// order, index >= limit written as -1; drop_neg_inf: -inf ones are dropped instead; unused
// positions -1. `pairs` and `taken` (count each) are this block's room for torch's selection.
// Called by every thread of the block. Rows of at most kHeldPerThread values a thread go to
// select_top_held instead; this form reads the row from memory at each pass (two radix digits
// for a row of BF16 values, as the index scores are, found in the first pass).
template <class Index>
__device__ void select_top(const float* vals, int64_t count, int64_t k, bool drop_neg_inf,
                           int64_t limit, int32_t* out, int64_t out_len, int* hist,
                           int* warp_totals, torch_select::Scored* pairs,
                           const BlockSelectRoomOf<Index>& room, uint8_t* taken, SelectForm form) {
  __shared__ uint32_t prefix_s;
  __shared__ int remaining_s, equal_s;
  k = lmin(k, count);
  uint32_t prefix = 0, mask = 0;
  int remaining = static_cast<int>(k);
  int last_shift = 0;
  const int64_t stride = static_cast<int64_t>(blockDim.x);
  for (int shift = 24; shift >= last_shift; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    bool bf16 = true;
    for (int64_t base = 0; base < count; base += kStreamLoads * stride) {
      uint32_t key[kStreamLoads];
      stream_keys(vals, count, base, key);
      FD_UNROLL
      for (int u = 0; u < kStreamLoads; ++u) {
        const bool valid = base + u * stride + threadIdx.x < count;
        bf16 = bf16 && (!valid || bf16_key(key[u]));
        count_digit(valid, key[u], mask, prefix, shift, hist);
      }
    }
    if (shift == 24 && !__syncthreads_or(!bf16)) last_shift = 16;
    __syncthreads();
    if (threadIdx.x < 32)
      pick_digit(hist, shift, shift == last_shift, prefix, remaining, &prefix_s, &remaining_s,
                 &equal_s);
    __syncthreads();
    prefix = prefix_s;
    remaining = remaining_s;
    mask |= 0xFFu << shift;
    __syncthreads();
  }
  if (last_shift == 16) prefix |= (prefix >> 31) ? 0u : 0xFFFFu;
  const uint32_t threshold = prefix;  // the k-th best key; `remaining` of its equals are taken
  const uint32_t neg_inf = order_key(-INFINITY);
  // Which equals: torch's choice, unless all of them are taken (or all dropped), or none lies
  // below the limit (equals_below_limit).
  bool tie = k > 0 && equal_s > remaining && !(drop_neg_inf && threshold == neg_inf);
  if (tie && limit < count) {  // (uniform: shared values)
    bool below = false;
    for (int64_t i = threadIdx.x; i < limit; i += stride)
      below = below || order_key(vals[i]) == threshold;
    tie = equals_below_limit(below);
  }
  if (tie && heap_selects_values(count, k, room, form)) {
    // Torch heap-selects: from the values themselves, the marks cleared at the equals only (the
    // compaction reads no others).
    for (int64_t base = 0; base < count; base += kStreamLoads * stride) {
      uint32_t key[kStreamLoads];
      stream_keys(vals, count, base, key);
      FD_UNROLL
      for (int u = 0; u < kStreamLoads; ++u) {
        const int64_t i = base + u * stride + threadIdx.x;
        if (i < count && key[u] == threshold) taken[i] = 0;
      }
    }
    __syncthreads();
    block_heap_select_values(vals, count, k, room, warp_totals, form);
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x)
      if (order_key(room.heap[j].value) == threshold) taken[room.heap[j].index] = 1;
    __syncthreads();
  } else if (tie) {
    for (int64_t base = 0; base < count; base += kStreamLoads * stride) {
      float v[kStreamLoads];
      FD_UNROLL
      for (int u = 0; u < kStreamLoads; ++u) {
        const int64_t i = base + u * stride + threadIdx.x;
        v[u] = i < count ? vals[i] : 0.0f;
      }
      FD_UNROLL
      for (int u = 0; u < kStreamLoads; ++u) {
        const int64_t i = base + u * stride + threadIdx.x;
        if (i < count) {
          pairs[i] = torch_select::Scored{v[u], static_cast<int32_t>(i)};
          taken[i] = 0;
        }
      }
    }
    __syncthreads();
    block_torch_select(pairs, count, k, room, warp_totals, form);
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x)
      if (order_key(pairs[j].value) == threshold) taken[pairs[j].index] = 1;
    __syncthreads();
  }
  // The ordered compaction over tiles of kStreamLoads values a thread, thread t taking the tile's
  // run kStreamLoads t .. (so thread order is index order): one block scan a tile over two 16-bit
  // counts (a tile has at most 8,192 of each) of values above the threshold and of its equals
  // that are taken (torch's marks, or else every equal, of which the first `remaining` in index
  // order count). One scan per 1,024 values was most of a 1M-entry row's compaction.
  const int64_t tile = kStreamLoads * stride;
  int64_t written = 0, equal_seen = 0;
  for (int64_t base = 0; base < count; base += tile) {
    const int64_t first = base + kStreamLoads * static_cast<int64_t>(threadIdx.x);
    uint32_t key[kStreamLoads];
    FD_UNROLL
    for (int u = 0; u < kStreamLoads; ++u)
      key[u] = first + u < count ? order_key(vals[first + u]) : 0u;
    unsigned above = 0, equal = 0;  // bit u: value first + u
    FD_UNROLL
    for (int u = 0; u < kStreamLoads; ++u) {
      const int64_t s = first + u;
      const bool in = s < count && k > 0 && !(drop_neg_inf && key[u] == neg_inf);
      above |= static_cast<unsigned>(in && key[u] > threshold) << u;
      equal |= static_cast<unsigned>(in && key[u] == threshold && (!tie || taken[s])) << u;
    }
    int totals = 0;
    const int before =
        block_exclusive_scan(__popc(above) | (__popc(equal) << 16), warp_totals, &totals);
    const int64_t equal_room = tie ? int64_t{1} << 40 : lmax(int64_t{0}, remaining - equal_seen);
    int64_t above_before = before & 0xFFFF, equal_before = before >> 16;
    FD_UNROLL
    for (int u = 0; u < kStreamLoads; ++u) {
      const bool a = (above >> u) & 1u, e = (equal >> u) & 1u;
      if (a || (e && equal_before < equal_room)) {
        const int64_t pos = written + above_before + lmin(equal_before, equal_room);
        const int64_t s = first + u;
        if (pos < out_len) out[pos] = s < limit ? static_cast<int32_t>(s) : -1;
      }
      above_before += a;
      equal_before += e;
    }
    written += (totals & 0xFFFF) + lmin(static_cast<int64_t>(totals >> 16), equal_room);
    equal_seen += totals >> 16;
  }
  for (int64_t i = written + threadIdx.x; i < out_len; i += blockDim.x) out[i] = -1;
  __syncthreads();
}

// A row held in registers: thread t holds values [t * per, (t + 1) * per) of a row of at most
// kHeldPerThread * blockDim.x (18,432: a V4.1 decode row at a 16K context, 16,385 entries, 17
// each; 24 a thread spilled registers). The row is read from memory once, its loads all in
// flight together; the radix passes then count from registers, and the ordered compaction is one
// block scan of the threads' counts (threads hold contiguous runs, so thread order is index
// order). Reading the row from L2 at every pass, one load at a
// time, and a block scan per 1024 entries were most of the decode selection's time.
constexpr int kHeldPerThread = 18;

struct HeldRow {
  uint32_t key[kHeldPerThread];  // order_key of the values
  int per, first;                // values a thread, this thread's first index
  int count;                     // (32-bit: a held row is short, and 64-bit indices cost registers)
  __device__ bool valid(int j) const { return j < per && first + j < count; }
};

// The value of an order key (order_key's inverse, but for -0, which reads as +0).
__device__ __forceinline__ float key_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? key & 0x7FFFFFFFu : ~key);
}

__device__ inline void load_held(const float* vals, int64_t count, HeldRow& row) {
  row.count = static_cast<int>(count);
  row.per = (row.count + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  row.first = static_cast<int>(threadIdx.x) * row.per;
  const bool vec = row.per % 4 == 0 && (reinterpret_cast<uintptr_t>(vals) & 15u) == 0;
  FD_UNROLL
  for (int j = 0; j < kHeldPerThread; j += 4) {
    const int s = row.first + j;
    if (vec && j + 4 <= kHeldPerThread && j < row.per && s + 4 <= row.count) {
      const float4 f = *reinterpret_cast<const float4*>(vals + s);
      row.key[j] = order_key(f.x);
      row.key[j + 1] = order_key(f.y);
      row.key[j + 2] = order_key(f.z);
      row.key[j + 3] = order_key(f.w);
    } else {
      FD_UNROLL
      for (int u = 0; u < 4; ++u)
        if (j + u < kHeldPerThread)  // (the array's end: kHeldPerThread need not divide by 4)
          row.key[j + u] = row.valid(j + u) ? order_key(vals[s + u]) : 0u;
    }
  }
}

// select_top over a held row (the same result); `vals` is the row in memory again, read only
// where torch's selection runs.
template <class Index>
__device__ void select_top_held(HeldRow row, const float* vals, int64_t k, bool drop_neg_inf,
                                int64_t limit, int32_t* out, int64_t out_len, int* hist,
                                int* warp_totals, torch_select::Scored* pairs,
                                const BlockSelectRoomOf<Index>& room, uint8_t* taken,
                                SelectForm form) {
  __shared__ uint32_t prefix_s;
  __shared__ int remaining_s, equal_s;
  const int count = row.count, per = row.per;
  uint32_t* key = row.key;
  k = lmin(k, count);
  // Rows of BF16 values (the index scores are rounded to BF16) need two digits: a BF16 value's
  // key is fixed by its top 16 bits (low bits 0, or all ones for a negative value).
  bool bf16 = true;
  FD_UNROLL
  for (int j = 0; j < kHeldPerThread; ++j)
    if (row.valid(j)) bf16 = bf16 && bf16_key(key[j]);
  const int last_shift = __syncthreads_or(!bf16) ? 0 : 16;
  uint32_t prefix = 0, mask = 0;
  int remaining = static_cast<int>(k);
  for (int shift = 24; shift >= last_shift; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    FD_UNROLL
    for (int j = 0; j < kHeldPerThread; ++j) {
      if (j >= per) break;  // uniform over the block
      count_digit(row.valid(j), key[j], mask, prefix, shift, hist);
    }
    __syncthreads();
    if (threadIdx.x < 32)
      pick_digit(hist, shift, shift == last_shift, prefix, remaining, &prefix_s, &remaining_s,
                 &equal_s);
    __syncthreads();
    prefix = prefix_s;
    remaining = remaining_s;
    mask |= 0xFFu << shift;
    __syncthreads();
  }
  if (last_shift == 16) prefix |= (prefix >> 31) ? 0u : 0xFFFFu;
  const uint32_t threshold = prefix;
  const uint32_t neg_inf = order_key(-INFINITY);
  bool tie = k > 0 && equal_s > remaining && !(drop_neg_inf && threshold == neg_inf);
  if (tie && limit < count) {  // (uniform: shared values)
    bool below = false;
    FD_UNROLL
    for (int j = 0; j < kHeldPerThread; ++j)
      below = below || (row.valid(j) && key[j] == threshold && row.first + j < limit);
    tie = equals_below_limit(below);
  }
  if (tie) {
    // The pairs in index order, written coalesced from a second read of the row, four loads in
    // flight a thread (writing them from the held runs would put a warp's stores on one bank).
    for (int64_t base = 0; base < count; base += 4 * static_cast<int64_t>(blockDim.x)) {
      float v[4];
      FD_UNROLL
      for (int u = 0; u < 4; ++u) {
        const int64_t s = base + u * static_cast<int64_t>(blockDim.x) + threadIdx.x;
        v[u] = s < count ? vals[s] : 0.0f;
      }
      FD_UNROLL
      for (int u = 0; u < 4; ++u) {
        const int64_t s = base + u * static_cast<int64_t>(blockDim.x) + threadIdx.x;
        if (s < count) {
          pairs[s] = torch_select::Scored{v[u], static_cast<int32_t>(s)};
          taken[s] = 0;
        }
      }
    }
    __syncthreads();
    block_torch_select(pairs, count, k, room, warp_totals, form);
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x)
      if (order_key(pairs[j].value) == threshold) taken[pairs[j].index] = 1;
    // The held keys read again: holding them through torch's selection spilled registers.
    load_held(vals, count, row);
    __syncthreads();
  }
  // The ordered compaction: a thread's counts of values above the threshold and of its equals
  // that are taken (torch's marks, or else every equal, of which the first `remaining` in index
  // order count), one block scan of both (16-bit halves: a held row has at most 18,432), then each
  // thread writes its own in order.
  const auto kind = [&](int j, bool& above, bool& equal) {
    const int s = row.first + j;
    const bool in = row.valid(j) && k > 0 && !(drop_neg_inf && key[j] == neg_inf);
    above = in && key[j] > threshold;
    equal = in && key[j] == threshold && (!tie || taken[s]);
  };
  int n_above = 0, n_equal = 0;
  FD_UNROLL
  for (int j = 0; j < kHeldPerThread; ++j) {
    if (j >= per) break;
    bool above, equal;
    kind(j, above, equal);
    n_above += above;
    n_equal += equal;
  }
  int totals = 0;
  const int before = block_exclusive_scan(n_above | (n_equal << 16), warp_totals, &totals);
  const int equal_room = tie ? 1 << 30 : remaining;
  int above_before = before & 0xFFFF, equal_before = before >> 16;
  FD_UNROLL
  for (int j = 0; j < kHeldPerThread; ++j) {
    if (j >= per) break;
    bool above, equal;
    kind(j, above, equal);
    if (above || (equal && equal_before < equal_room)) {
      const int pos = above_before + (equal_before < equal_room ? equal_before : equal_room);
      const int s = row.first + j;
      if (pos < out_len) out[pos] = s < limit ? s : -1;
    }
    above_before += above;
    equal_before += equal;
  }
  const int written = (totals & 0xFFFF) + ((totals >> 16) < equal_room ? totals >> 16 : equal_room);
  for (int64_t i = written + threadIdx.x; i < out_len; i += blockDim.x) out[i] = -1;
  __syncthreads();
}

// One block per query (rows t0 + blockIdx.x): top-k entries, then (with candidates) the
// candidate blocks, whose scores are taken before the top-k. With two blocks a query (gridDim.y
// 2, candidates only) block y 0 selects the top-k and block y 1 the candidate blocks, each in
// its own scratch rows: the two selections, each a serial heap on long rows, overlap. kShared:
// torch's selection works in shared memory (shared_select_bytes(width) of it), else in `tie`'s
// global rows.
template <bool kShared>
__global__ void __launch_bounds__(kSelectThreads)
    indexer_select_kernel(IdxArgs call, int64_t t0, const float* scores, int64_t k, int32_t* topk,
                          float* block_scores, int64_t c, int32_t* candidates, TieScratch tie) {
  FD_GRID_PROLOGUE();
  const IdxArgs a = sized(call);
  __shared__ int hist[256];
  __shared__ int warp_totals[kSelectThreads / 32];
  const int64_t t = t0 + blockIdx.x;
  const float* sc = scores + t * a.width;
  // Which selections this block makes (uniform in the block, so the barriers below are too).
  const bool split = gridDim.y == 2;
  const bool selects_top = !split || blockIdx.y == 0;
  const bool selects_candidates = candidates && (!split || blockIdx.y == 1);
  const int64_t slot = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  uint8_t* taken = tie.taken + slot * a.width;
  using Index = std::conditional_t<kShared, uint16_t, int32_t>;
  torch_select::Scored* pairs;
  BlockSelectRoomOf<Index> room;
  if constexpr (kShared) {
    FD_DYNAMIC_SMEM(unsigned char, smem);
    pairs = reinterpret_cast<torch_select::Scored*>(smem);
    Index* lists = reinterpret_cast<Index*>(pairs + a.width);
    room = {lists, lists + a.width};
  } else {
    // The row's pairs in global memory; the heap select's copy of the heap (HeapSteps Warp or
    // Thread) in shared memory.
    pairs = tie.pairs + slot * a.width;
    Index* lists = tie.lists + slot * 2 * a.width;
    room = {lists, lists + a.width, heap_room(), kHeapRoomPairs};
  }
  float* bs = candidates ? block_scores + t * a.n_blocks : nullptr;
  // Rows held in registers in the shared-memory kernel only (the global one, for rows too wide
  // for shared memory, spilled registers with both forms in it).
  const bool held = kShared && a.width <= static_cast<int64_t>(kHeldPerThread) * blockDim.x;
  HeldRow row;
  if (held) load_held(sc, a.width, row);
  if (selects_candidates) {
    const int64_t visible = lmin(a.visible[t], a.entries);
    const auto block_score = [&](int64_t b, float m) {
      return (visible >= 1 && b == (visible - 1) / a.block_size) ? INFINITY : m;
    };
    if (held && row.per % a.block_size == 0) {
      // Whole blocks in this thread's run: their maxima from registers (as order keys: the same
      // maximum as fmaxf but for NaN, which scores never are).
      for (int64_t j0 = 0; j0 < row.per; j0 += a.block_size) {
        const int64_t b = (row.first + j0) / a.block_size;  // (j0: a multiple of the block)
        if (b >= a.n_blocks) break;
        uint32_t m = order_key(-INFINITY);
        FD_UNROLL
        for (int j = 0; j < kHeldPerThread; ++j)
          if (j >= j0 && j < j0 + a.block_size && row.valid(j) && row.key[j] > m) m = row.key[j];
        bs[b] = block_score(b, key_value(m));
      }
    } else {
      for (int64_t b = threadIdx.x; b < a.n_blocks; b += blockDim.x) {
        const int64_t s0 = b * a.block_size, s1 = lmin(s0 + a.block_size, a.width);
        float m = -INFINITY;
        if (a.block_size <= 8) {  // the model's 8: the block's loads in flight together
          float v[8];
          FD_UNROLL
          for (int i = 0; i < 8; ++i) v[i] = s0 + i < s1 ? sc[s0 + i] : -INFINITY;
          FD_UNROLL
          for (int i = 0; i < 8; ++i) m = fmaxf(m, v[i]);
        } else {
          for (int64_t s = s0; s < s1; ++s) m = fmaxf(m, sc[s]);
        }
        bs[b] = block_score(b, m);
      }
    }
    __syncthreads();
  }
  if (selects_top) {
    if (held)
      select_top_held(row, sc, k, false, a.visible[t], topk + t * k, k, hist, warp_totals, pairs,
                      room, taken, tie.form);
    else
      select_top(sc, a.width, k, false, a.visible[t], topk + t * k, k, hist, warp_totals, pairs,
                 room, taken, tie.form);
  }
  if (!selects_candidates) return;
  if (kShared && a.n_blocks <= static_cast<int64_t>(kHeldPerThread) * blockDim.x) {
    HeldRow blocks;
    load_held(bs, a.n_blocks, blocks);
    select_top_held(blocks, bs, c, true, a.n_blocks, candidates + t * c, c, hist, warp_totals,
                    pairs, room, taken, tie.form);
  } else {
    select_top(bs, a.n_blocks, c, true, a.n_blocks, candidates + t * c, c, hist, warp_totals, pairs,
               room, taken, tie.form);
  }
}

}  // namespace
}  // namespace cuda

using cuda::blocks_for;
using cuda::ptr;

namespace {

// Calls of at least this many query rows score on the tensor cores (IndexerKernels::Auto): a
// CTA there takes 2 to 8 queries and walks their rows, where the CUDA-core kernel spreads a
// decode row's entries over blocks.
constexpr int64_t kTensorCoreMinRows = 64;
constexpr int64_t kStepWidthBucket = 512;

// A call's score rows [n, width] and what the selection reads beside them (the uploaded visible
// counts, the Reindex restriction as a block mask), queued on the context's stream.
struct ScoreRows {
  cuda::IdxArgs a{};
  Tensor visible, allowed, scores;
};

// Threads a selecting block has (CudaBackend::set_prefill_select_threads): the whole 1024 but in
// prefill-sized calls selecting in shared memory, which take the setting's count, doubled until
// the row is held in registers (as it is with 1024 threads).
unsigned select_threads(int64_t rows, int64_t width, bool shared, int setting) {
  if (!shared || rows < kTensorCoreMinRows) return cuda::kSelectThreads;
  int64_t threads = setting;
  while (threads < cuda::kSelectThreads && width > cuda::kHeldPerThread * threads) threads *= 2;
  return static_cast<unsigned>(threads);
}

ScoreRows score_rows(CudaBackend& backend, const IndexerArgs& args,
                     CudaBackend::IndexerKernels kernels) {
  cuda::DeviceContext& ctx = backend.context();
  const Tensor& q = *args.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2), E = args.keys.n_entries;
  const int64_t width = std::max(E, args.select_width);
  FD_CHECK(heads <= cuda::kMaxIndexHeads, "indexer: at most 64 heads on CUDA");
  const int64_t bs = args.block_size;
  // Inside a step graph the sizes go to the device (IdxArgs::sizes) and the launches are sized
  // for the bucket of kStepWidthBucket entries the row falls in.
  const bool in_step = ctx.in_step();
  const int64_t true_blocks = (width + bs - 1) / bs;
  const int64_t sized_width =
      in_step ? (width + kStepWidthBucket - 1) / kStepWidthBucket * kStepWidthBucket : width;
  const int64_t n_blocks = (sized_width + bs - 1) / bs;
  ScoreRows r;
  cuda::IdxArgs& a = r.a;
  a.q = ptr<const float>(q);
  a.weights = ptr<const float>(*args.weights);
  // The visible counts, and inside a step the sizes after them, in one upload.
  std::vector<int64_t> uploaded(args.n_visible.begin(), args.n_visible.end());
  if (in_step) uploaded.insert(uploaded.end(), {E, width, true_blocks});
  r.visible = ctx.upload_span(std::span<const int64_t>(uploaded), DType::I64);
  a.visible = ptr<const int64_t>(r.visible);
  a.sizes = in_step ? a.visible + n : nullptr;
  a.keys = E ? ptr<const uint8_t>(*args.keys.rows) : nullptr;
  a.n = n;
  a.heads = heads;
  a.dim = d;
  a.entries = in_step ? sized_width : E;
  a.block_size = bs;
  a.n_blocks = n_blocks;
  a.width = sized_width;
  if (args.restrict_blocks && width > 0) {
    r.allowed = ctx.scratch(DType::U8, Shape{n, n_blocks});
    backend.fill_zero(r.allowed);
    const int64_t c = args.restrict_blocks->dim(1);
    if (n * c > 0)
      FD_LAUNCH(cuda::restriction_mask_kernel, dim3(blocks_for(n * c, 256)), dim3(256), 0,
                ctx.stream(), ptr<const int32_t>(*args.restrict_blocks), n, c, n_blocks, a.sizes,
                ptr<uint8_t>(r.allowed));
    a.allowed = ptr<const uint8_t>(r.allowed);
  }
  // Rows of `width` scores one after another (the kernels' stride is the call's width), in room
  // for the bucket's.
  r.scores = ctx.scratch(DType::F32, Shape{n * std::max<int64_t>(sized_width, 1)});
  if (width == 0 || n == 0) return r;
  using K = CudaBackend::IndexerKernels;
  // The tensor-core kernels take the fields' sizes only: a step's rows (up to 64) are scored on
  // the CUDA cores, which write the same scores to the bit (indexer_tc.cu).
  const bool tc =
      !in_step && (kernels == K::TensorCores || (kernels == K::Auto && n >= kTensorCoreMinRows));
  if (tc && cuda::indexer_scores_tc_fits(a)) {
    cuda::indexer_scores_tc(ctx, a, ptr<float>(r.scores), backend.index_keys_decoded());
    return r;
  }
  const int entries = sized_width >= backend.score_pairs_from() ? 2 : 1;
  const auto kernel = heads <= 32 ? (entries == 2 ? &cuda::indexer_scores_kernel<32, 2>
                                                  : &cuda::indexer_scores_kernel<32, 1>)
                                  : (entries == 2 ? &cuda::indexer_scores_kernel<64, 2>
                                                  : &cuda::indexer_scores_kernel<64, 1>);
  FD_LAUNCH(kernel,
            dim3(blocks_for(sized_width * cuda::kLanesPerEntry, cuda::kScoreThreads * entries),
                 static_cast<unsigned>(n)),
            dim3(cuda::kScoreThreads), static_cast<size_t>(heads * (d + 4)) * sizeof(float),
            ctx.stream(), a, ptr<float>(r.scores));
  return r;
}

// The selection over a call's score rows (indexer_select, indexer_select_rows): top-k entries and
// candidate blocks, in torch's choice among ties, on the backend's selection settings.
void select_rows(CudaBackend& be, const ScoreRows& rows, Tensor& topk, Tensor* candidates) {
  cuda::DeviceContext& ctx = be.context();
  const int64_t n = rows.a.n;
  // k may exceed the row (a short context's step keeps the model's width): the rest is -1.
  const int64_t k = topk.dim(1);
  const cuda::IdxArgs& a = rows.a;
  const Tensor& scores = rows.scores;
  const int64_t n_blocks = a.n_blocks;
  const int64_t c = candidates ? candidates->dim(1) : 0;
  Tensor block_scores;
  if (candidates) {
    FD_CHECK(candidates->rows() == n && candidates->dtype() == DType::I32,
             "indexer: candidates " + candidates->shape().str());
    block_scores = ctx.scratch(DType::F32, Shape{n, std::max<int64_t>(n_blocks, 1)});
  }
  // Room for torch's selection, for a group of rows at a time (bounded, as a long prompt's rows
  // times a long cache would not fit): in shared memory where the row fits there. For the
  // launch's row (a step's bucket).
  const int64_t row = std::max<int64_t>(a.width, 1);
  const int64_t smem = cuda::shared_select_bytes(row);
  const bool shared =
      be.select_in_shared_memory() &&
      smem + cuda::kSelectStaticSmem <= static_cast<int64_t>(ctx.props().sharedMemPerBlockOptin);
  // Rows too wide for shared memory select their top-k and their candidate blocks on two blocks
  // a query, each with its own scratch rows (select_split).
  const int64_t ways = candidates && !shared && be.select_split() ? 2 : 1;
  const int64_t row_room = ways * row *
                           static_cast<int64_t>(shared ? sizeof(uint8_t)
                                                       : sizeof(torch_select::Scored) +
                                                             2 * sizeof(int32_t) + sizeof(uint8_t));
  const int64_t group = std::clamp<int64_t>((int64_t{64} << 20) / row_room, 1, n);
  Tensor pairs, lists;
  if (!shared) {
    pairs = ctx.scratch(
        DType::U8, Shape{ways * group, row * static_cast<int64_t>(sizeof(torch_select::Scored))});
    lists = ctx.scratch(DType::I32, Shape{ways * group, 2 * row});
  }
  Tensor taken = ctx.scratch(DType::U8, Shape{ways * group, row});
  const cuda::TieScratch tie{shared ? nullptr : ptr<torch_select::Scored>(pairs),
                             shared ? nullptr : ptr<int32_t>(lists), ptr<uint8_t>(taken),
                             cuda::select_form(be.select_runs(), be.heap_steps(),
                                               be.select_warp_tail(), be.select_stop_masks())};
  if (shared)
    cuda::allow_dynamic_smem<cuda::indexer_select_kernel<true>>(static_cast<size_t>(smem));
  const unsigned threads = select_threads(n, row, shared, be.prefill_select_threads());
  for (int64_t t0 = 0; t0 < n; t0 += group) {
    const dim3 grid(static_cast<unsigned>(std::min(group, n - t0)), static_cast<unsigned>(ways));
    if (shared)
      FD_LAUNCH(cuda::indexer_select_kernel<true>, grid, dim3(threads), static_cast<size_t>(smem),
                ctx.stream(), a, t0, ptr<const float>(scores), k, ptr<int32_t>(topk),
                candidates ? ptr<float>(block_scores) : nullptr, c,
                candidates ? ptr<int32_t>(*candidates) : nullptr, tie);
    else
      FD_LAUNCH(cuda::indexer_select_kernel<false>, grid, dim3(cuda::kSelectThreads), 0,
                ctx.stream(), a, t0, ptr<const float>(scores), k, ptr<int32_t>(topk),
                candidates ? ptr<float>(block_scores) : nullptr, c,
                candidates ? ptr<int32_t>(*candidates) : nullptr, tie);
  }
}

}  // namespace

void CudaBackend::set_prefill_select_threads(int threads) {
  FD_CHECK(threads >= 64 && threads <= cuda::kSelectThreads && (threads & (threads - 1)) == 0,
           "indexer selection (FLASHDESK_CUDA_SELECT_THREADS): 64, 128, 256, 512 or 1024 "
           "threads a block, not " +
               std::to_string(threads));
  prefill_select_threads_ = threads;
}

// A decode step's selection is one block a query: the rest of the GPU is free for the query's
// projections beside it. Prefill-sized calls fill the GPU themselves.
bool CudaBackend::indexer_beside_query(int64_t rows) const {
  return indexer_beside_ && rows <= cuda::kGemvTokens;
}

Tensor CudaBackend::indexer_scores(const IndexerArgs& args) {
  const int64_t n = args.q->rows();
  cuda::DeviceGuard g(ctx_->device());
  // indexer_select's shape rules, a one-column top-k standing in for its output.
  check_indexer_args(args, ctx_->scratch(DType::I32, Shape{n, 1}));
  const int64_t width = std::max(args.keys.n_entries, args.select_width);
  const Tensor scores = score_rows(*this, args, indexer_kernels_).scores;
  return Tensor(scores.memory(), scores.byte_offset(), DType::F32,
                Shape{n, std::max<int64_t>(width, 1)});
}

void CudaBackend::indexer_select(const IndexerArgs& args, Tensor& topk, Tensor* candidates) {
  check_indexer_args(args, topk);
  if (args.q->rows() == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  select_rows(*this, score_rows(*this, args, indexer_kernels_), topk, candidates);
}

void CudaBackend::indexer_select_rows(const Tensor& scores, std::span<const int64_t> n_visible,
                                      int64_t block_size, Tensor& topk, Tensor* candidates) {
  const int64_t n = scores.rows(), width = scores.dim(1);
  FD_CHECK(scores.dtype() == DType::F32 && scores.shape().rank() == 2 && topk.rows() == n &&
               topk.dtype() == DType::I32 && static_cast<int64_t>(n_visible.size()) == n &&
               block_size > 0,
           "indexer_select_rows: scores " + scores.shape().str() + ", top-k " + topk.shape().str() +
               ", " + std::to_string(n_visible.size()) + " visible counts");
  FD_CHECK(!ctx_->in_step(), "indexer_select_rows: not inside a step graph (no bucketed sizes)");
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  ScoreRows r;
  cuda::IdxArgs& a = r.a;
  r.visible = ctx_->upload_span(n_visible, DType::I64);
  a.visible = ptr<const int64_t>(r.visible);
  a.n = n;
  a.entries = width;
  a.width = width;
  a.block_size = block_size;
  a.n_blocks = (width + block_size - 1) / block_size;
  r.scores = scores;
  select_rows(*this, r, topk, candidates);
}

}  // namespace flashdesk
