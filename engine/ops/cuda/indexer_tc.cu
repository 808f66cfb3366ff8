// The indexer's scores of prefill-sized calls on the tensor cores (docs/numerics.md "Indexer";
// indexer.cu's CUDA-core kernel takes decode and the shapes this one does not). A CTA takes the
// A rows of 128 / HP queries (a row per (query, head), heads padded to HP = 16, 32 or 64: 128
// rows, a 16-row tile a warp, its fragments in registers for the whole kernel) and walks 64-entry
// key tiles of its part of the row:
//   1. the tile's FP4 keys decoded to BF16 into shared memory, once for every query and head;
//   2. d = q . k on the tensor cores (mma.cuh): each warp its 16 rows by the 64 entries, each
//      32-value block of the head dim in a fresh accumulator, the blocks added by the CUDA cores;
//   3. r = bf16(relu(bf16(d)) * w) per (row, entry), staged in shared memory as BF16 (exact: r
//      is a BF16 value);
//   4. a thread per (query, entry) sums its heads' r in head order and writes bf16(sum), -inf
//      where the entry is not visible or outside the Reindex restriction.
// Tiles past every query of the CTA only write -inf (causality: most of an early query's row).
//
// Why the scores equal the CUDA-core kernel's to the bit: q (FP4 x UE8M0, kept as F32) and the
// keys (E2M1 x UE8M0) are exact in BF16, so every product is exact, and only the order of the
// FP32 sum of a dot product differs (the CUDA-core kernel adds the products in dim order). That
// order cannot matter when every partial sum is exact: all products multiples of 2^lo and the
// sum of their magnitudes below 2^(24 + lo). Each (row, entry) checks it from the exponent
// ranges of its query row and key (sums_exact); for FP4 data it holds unless the UE8M0 scales of
// a row and a key spread over more than about 2^9 together. Where it fails (or q is not a normal
// BF16 value, or a key scale is extreme) that one dot product is redone in dim order on the CUDA
// cores from the F32 query and the staged key: the CUDA-core kernel's sum. Inside the tensor cores
// only a 32-value block's sum is formed (13 bits from its largest product to its quantum for FP4
// data, at most 24 where the check passes), which they hold exactly as long as they align an
// mma's products with at least FP32's 24 bits; a running sum over blocks is not kept in them
// (they truncate as they accumulate, docs/cuda-backend.md "Attention, prefill-sized calls").
#include <algorithm>
#include <string>

#include "engine/ops/cuda/bf16_codes.cuh"
#include "engine/ops/cuda/indexer_args.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/mma.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // a CTA's A rows: (query, head) pairs
constexpr int kTile = 64;           // entries a key tile: eight 8-entry mma columns
// BF16 values after each staged key row: a row 16 words mod 32 from the next, so the 16-byte B
// loads of a quarter warp (two rows, four lanes each) hit 32 different banks.
constexpr int kKeyPad = 32;
// BF16 values after each staged term row: rows 4 words mod 32 apart, so the epilogue's pair
// stores (8 rows by 4 lanes) and the head sums' row reads take no bank twice.
constexpr int kTermStride = kTile + 8;

// Exponent ranges (sums_exact): lo the exponent of the lowest set bit over the nonzero values,
// hi one above every |value|'s exponent. A range without a nonzero value is kEmpty; one with a
// value the tensor cores might not take exactly is kInexact, which wins every min and max.
constexpr int kEmptyLo = 1 << 10, kEmptyHi = -(1 << 10);
constexpr int kInexactLo = -(1 << 20), kInexactHi = 1 << 20;

__device__ __forceinline__ int imin(int a, int b) {
  return a < b ? a : b;
}
__device__ __forceinline__ int imax(int a, int b) {
  return a > b ? a : b;
}

// Widens [lo, hi] by a query value (F32 bits u): exact if it is a normal BF16 value.
__device__ __forceinline__ void widen_by_value(uint32_t u, int& lo, int& hi) {
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag == 0) return;
  const int e = static_cast<int>(mag >> 23);
  const bool exact = e != 0 && e != 255 && (u & 0xFFFFu) == 0;
  const int lowest = e - 150 + (__ffs(static_cast<int>(mag | 0x800000u)) - 1);
  lo = imin(lo, exact ? lowest : kInexactLo);
  hi = imax(hi, exact ? e - 126 : kInexactHi);
}

// Widens [lo, hi] by eight E2M1 codes of a block with UE8M0 scale code `scale`: values are
// multiples of 0.5 up to 6, times 2^(scale - 127); scales whose values are subnormal or reach
// 2^128 count as inexact.
__device__ __forceinline__ void widen_by_codes(uint32_t codes, uint32_t scale, int& lo, int& hi) {
  if ((codes & 0x77777777u) == 0) return;
  const bool exact = scale >= 2 && scale <= 251;
  lo = imin(lo, exact ? static_cast<int>(scale) - 128 : kInexactLo);
  hi = imax(hi, exact ? static_cast<int>(scale) - 124 : kInexactHi);
}

// Whether a dot product of D = 2^kLog2Dim products whose ranges combine to [lo, hi] (query lo +
// key lo, query hi + key hi) has only exact FP32 partial sums, in any order: every product a
// multiple of 2^lo, no subnormal (lo >= -126), the magnitudes summing below 2^(24 + lo) and 2^127.
template <int kLog2Dim>
__device__ __forceinline__ bool sums_exact(int lo, int hi) {
  return lo >= -126 && hi + kLog2Dim <= lo + 24 && hi + kLog2Dim <= 127;
}

// A row of the CTA's A tile as this lane sees it: its query's exponent range and weight.
// Padding rows (past the last query, or heads past the model's) take kPadding: never redone.
struct RowInfo {
  int lo, hi;
  float w;
};
constexpr int kPaddingLo = 1 << 22, kPaddingHi = -(1 << 22);

// Row r of the A tile: query t0 + r / HP, head r % HP.
template <int HP>
__device__ __forceinline__ bool row_valid(const IdxArgs& a, int64_t t0, int r) {
  return t0 + r / HP < a.n && r % HP < a.heads;
}
template <int HP, int D>
__device__ __forceinline__ const float* query_row(const IdxArgs& a, int64_t t0, int r) {
  return a.q + ((t0 + r / HP) * a.heads + r % HP) * D;
}

// The warp's A fragments (rows 16 warp + g and + 8) for every 32-value block j of the head dim:
// lane (g, quad) holds dims 32 j + 8 quad .. + 7, the first four in the block's first mma, the
// last four in its second (mma.cuh's k pairs c, c + 1 and c + 8, c + 9); the key loads split a
// block the same way, so the two mmas cover its 32 products. Also the rows' ranges, reduced over
// the four lanes of a row.
template <int HP, int D>
__device__ __forceinline__ void load_query(const IdxArgs& a, int64_t t0,
                                           uint32_t (&qf)[D / 32][2][4], RowInfo (&rows)[2]) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, quad = lane & 3;
  FD_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int r = 16 * warp + g + 8 * half;
    const bool valid = row_valid<HP>(a, t0, r);
    int lo = kEmptyLo, hi = kEmptyHi;
    const float* q = valid ? query_row<HP, D>(a, t0, r) + 8 * quad : nullptr;
    FD_UNROLL
    for (int j = 0; j < D / 32; ++j) {
      const float4 zero{0.0f, 0.0f, 0.0f, 0.0f};
      const float4 v[2] = {valid ? load_aligned<float4>(q + 32 * j) : zero,
                           valid ? load_aligned<float4>(q + 32 * j + 4) : zero};
      FD_UNROLL
      for (int step = 0; step < 2; ++step) {
        const float4 x = v[step];
        widen_by_value(__float_as_uint(x.x), lo, hi);
        widen_by_value(__float_as_uint(x.y), lo, hi);
        widen_by_value(__float_as_uint(x.z), lo, hi);
        widen_by_value(__float_as_uint(x.w), lo, hi);
        qf[j][step][half] = pack_bf16_pair(f32_to_bf16_bits(x.x), f32_to_bf16_bits(x.y));
        qf[j][step][2 + half] = pack_bf16_pair(f32_to_bf16_bits(x.z), f32_to_bf16_bits(x.w));
      }
    }
    FD_UNROLL
    for (int o = 1; o < 4; o <<= 1) {
      lo = imin(lo, __shfl_xor_sync(kFullMask, lo, o));
      hi = imax(hi, __shfl_xor_sync(kFullMask, hi, o));
    }
    rows[half].lo = valid ? lo : kPaddingLo;
    rows[half].hi = valid ? hi : kPaddingHi;
    rows[half].w = valid ? a.weights[(t0 + r / HP) * a.heads + r % HP] : 0.0f;
  }
}

// Entries s0 .. s0 + 63 as BF16 rows of `keys` (zeros past the cache) and their exponent ranges;
// a lane decodes one 4-byte word of codes (8 values) at a time, D / 8 lanes a key.
template <int D>
__device__ __forceinline__ void stage_keys(const IdxArgs& a, int64_t s0, uint16_t* keys,
                                           int* key_lo, int* key_hi) {
  constexpr int kLanesPerKey = D / 8, kStride = D + kKeyPad;
  constexpr int64_t kRowBytes = D / 2 + D / 32;
  for (int u = static_cast<int>(threadIdx.x); u < kTile * kLanesPerKey; u += kThreads) {
    const int e = u / kLanesPerKey, part = u % kLanesPerKey;
    const int64_t s = s0 + e;
    uint32_t word = 0, scale = 0;
    if (s < a.entries) {
      const uint8_t* row = a.keys + s * kRowBytes;
      const uint8_t* c = row + 4 * part;
      word = kRowBytes % 4 == 0 ? load_aligned<uint32_t>(c)
                                : c[0] | (c[1] << 8) | (c[2] << 16) | (uint32_t{c[3]} << 24);
      scale = row[D / 2 + part / 4];
    }
    // The CUDA-core kernel's F32 key values, which BF16 holds exactly (two significant bits):
    // one BF16x2 multiply a pair where the scale keeps them normal, else through F32.
    uint32_t pairs[4];
    if (!e2m1x8_pow2_to_bf16(word, scale, pairs)) {
      const float f = e8m0_to_f32(scale);
      FD_UNROLL
      for (int i = 0; i < 4; ++i)
        pairs[i] = pack_bf16_pair(f32_to_bf16_bits(e2m1_to_f32((word >> (8 * i)) & 0xFu) * f),
                                  f32_to_bf16_bits(e2m1_to_f32((word >> (8 * i + 4)) & 0xFu) * f));
    }
    *reinterpret_cast<uint4*>(keys + e * kStride + 8 * part) =
        uint4{pairs[0], pairs[1], pairs[2], pairs[3]};
    int lo = kEmptyLo, hi = kEmptyHi;
    widen_by_codes(word, scale, lo, hi);
    FD_UNROLL
    for (int o = 1; o < kLanesPerKey; o <<= 1) {
      lo = imin(lo, __shfl_xor_sync(kFullMask, lo, o));
      hi = imax(hi, __shfl_xor_sync(kFullMask, hi, o));
    }
    if (part == 0) {
      key_lo[e] = lo;
      key_hi[e] = hi;
    }
  }
}

// The CUDA-core kernel's dot product: the F32 query times the key, added in dim order.
template <int D>
__device__ __forceinline__ float dot_in_order(const float* q, const uint16_t* key) {
  float acc = 0.0f;
  for (int i = 0; i < D; ++i) acc += q[i] * bf16_bits_to_f32(key[i]);
  return acc;
}

// Steps 2 and 3 for the warp's 16 rows: terms[row][entry] = bf16(relu(bf16(d)) * w).
template <int HP, int D>
__device__ __forceinline__ void stage_terms(const IdxArgs& a, int64_t t0, int64_t s0,
                                            const uint32_t (&qf)[D / 32][2][4],
                                            const RowInfo (&rows)[2], const uint16_t* keys,
                                            const int* key_lo, const int* key_hi,
                                            const int64_t* visible, uint16_t* terms) {
  constexpr int kStride = D + kKeyPad, kLog2Dim = D == 64 ? 6 : 7;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, quad = lane & 3;
  // A warp of padding rows (past the last query, or heads past the model's) has nothing to do.
  if (t0 + 16 * warp / HP >= a.n || 16 * warp % HP >= a.heads) return;
  float acc[8][4];
  FD_UNROLL
  for (int nt = 0; nt < 8; ++nt) FD_UNROLL
  for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  FD_UNROLL
  for (int j = 0; j < D / 32; ++j) {
    FD_UNROLL
    for (int nt = 0; nt < 8; ++nt) {
      const uint4 k = load_aligned<uint4>(keys + (8 * nt + g) * kStride + 32 * j + 8 * quad);
      const uint32_t b0[2] = {k.x, k.y}, b1[2] = {k.z, k.w};
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_bf16_16816(part, qf[j][0], b0);
      mma_bf16_16816(part, qf[j][1], b1);
      FD_UNROLL
      for (int i = 0; i < 4; ++i) acc[nt][i] += part[i];
    }
  }
  // The terms from the tensor cores' sums; the ones whose sums may not be exact (bit 4 nt + 2
  // half + c of `redo`) are redone after, when the accumulators are dead. A pair's roundings by
  // one conversion each (bf16x2_rn; a NaN d gives a 0 term either way, fmaxf drops it).
  const auto term_of = [](float d, float w) {
    return f32_to_bf16_bits(fmaxf(round_bf16(d), 0.0f) * w);
  };
  const auto terms_of = [](float d0, float d1, float w) {
    const uint32_t r = bf16x2_rn(d0, d1);
    return bf16x2_rn(fmaxf(__uint_as_float(r << 16), 0.0f) * w,
                     fmaxf(__uint_as_float(r & 0xFFFF0000u), 0.0f) * w);
  };
  uint32_t redo = 0;
  FD_UNROLL
  for (int nt = 0; nt < 8; ++nt) {
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      const RowInfo& row = rows[half];
      FD_UNROLL
      for (int c = 0; c < 2; ++c) {
        const int e = 8 * nt + 2 * quad + c;
        if (!sums_exact<kLog2Dim>(row.lo + key_lo[e], row.hi + key_hi[e]) &&
            s0 + e < visible[(16 * warp + g + 8 * half) / HP])
          redo |= 1u << (4 * nt + 2 * half + c);
      }
      const int r = 16 * warp + g + 8 * half;
      *reinterpret_cast<uint32_t*>(terms + r * kTermStride + 8 * nt + 2 * quad) =
          terms_of(acc[nt][2 * half], acc[nt][2 * half + 1], row.w);
    }
  }
  for (; redo != 0; redo &= redo - 1) {
    const int bit = __ffs(static_cast<int>(redo)) - 1, half = (bit >> 1) & 1;
    const int e = 8 * (bit >> 2) + 2 * quad + (bit & 1);
    const int r = 16 * warp + g + 8 * half;
    const float d = dot_in_order<D>(query_row<HP, D>(a, t0, r), keys + e * kStride);
    terms[r * kTermStride + e] = term_of(d, half ? rows[1].w : rows[0].w);
  }
}

// Step 4: a thread per (query, entry) of the tile: the heads' terms in head order, then bf16 (the
// CUDA-core kernel's sum); -inf where the entry is not live. Entries past the row are not written.
template <int HP>
__device__ __forceinline__ void sum_heads(const IdxArgs& a, int64_t t0, int64_t s0,
                                          const int64_t* visible, const uint16_t* terms,
                                          float* scores) {
  constexpr int kQueries = kRows / HP;
  for (int p = static_cast<int>(threadIdx.x); p < kQueries * kTile; p += kThreads) {
    const int ql = p / kTile, e = p % kTile;
    const int64_t t = t0 + ql, s = s0 + e;
    if (t >= a.n || s >= a.width) continue;
    const bool live =
        s < visible[ql] && !(a.allowed && !a.allowed[t * a.n_blocks + s / a.block_size]);
    float total = 0.0f;
    if (live)
      for (int64_t h = 0; h < a.heads; ++h)
        total += bf16_bits_to_f32(terms[(ql * HP + h) * kTermStride + e]);
    scores[t * a.width + s] = live ? round_bf16(total) : -INFINITY;
  }
}

// A tile past every query of the CTA: -inf only.
template <int HP>
__device__ __forceinline__ void write_unseen(const IdxArgs& a, int64_t t0, int64_t s0,
                                             float* scores) {
  constexpr int kQueries = kRows / HP;
  for (int p = static_cast<int>(threadIdx.x); p < kQueries * kTile; p += kThreads) {
    const int64_t t = t0 + p / kTile, s = s0 + p % kTile;
    if (t < a.n && s < a.width) scores[t * a.width + s] = -INFINITY;
  }
}

// grid (query groups, parts of the row): CTA (x, y) takes queries of group gridDim.x - 1 - x (the
// last queries, whose rows are longest, start first) and key tiles [y, y + 1) * tiles_per_cta.
template <int HP, int D>
__global__ void __launch_bounds__(kThreads, 2)
    indexer_tc_kernel(IdxArgs a, int64_t tiles_per_cta, float* scores) {
  FD_GRID_PROLOGUE();
  constexpr int kQueries = kRows / HP;
  __shared__ __align__(16) uint16_t keys[kTile * (D + kKeyPad)];  // 20 KiB at D = 128
  __shared__ __align__(16) uint16_t terms[kRows * kTermStride];   // 18 KiB
  __shared__ int key_lo[kTile], key_hi[kTile];
  __shared__ int64_t visible[kQueries];
  const int64_t t0 = (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kQueries;
  if (threadIdx.x < kQueries) {
    const int64_t t = t0 + threadIdx.x;
    visible[threadIdx.x] = t < a.n ? lmax(0, lmin(a.visible[t], a.entries)) : 0;
  }
  uint32_t qf[D / 32][2][4];
  RowInfo rows[2];
  load_query<HP, D>(a, t0, qf, rows);
  __syncthreads();
  int64_t seen = 0;  // entries the CTA's queries see at most
  for (int i = 0; i < kQueries; ++i) seen = lmax(seen, visible[i]);
  const int64_t tiles = (a.width + kTile - 1) / kTile;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * tiles_per_cta;
  const int64_t last = lmin(first + tiles_per_cta, tiles);
  for (int64_t tile = first; tile < last; ++tile) {
    const int64_t s0 = tile * kTile;
    if (s0 >= seen) {  // (uniform over the CTA; no shared memory touched)
      write_unseen<HP>(a, t0, s0, scores);
      continue;
    }
    // The previous tile's mmas finished before its second barrier, so the keys may be replaced;
    // its head sums read the terms before this barrier, so they may be rewritten after it.
    stage_keys<D>(a, s0, keys, key_lo, key_hi);
    __syncthreads();
    stage_terms<HP, D>(a, t0, s0, qf, rows, keys, key_lo, key_hi, visible, terms);
    __syncthreads();
    sum_heads<HP>(a, t0, s0, visible, terms, scores);
  }
}

template <int HP, int D>
void launch(DeviceContext& ctx, const IdxArgs& a, float* scores) {
  constexpr int64_t kQueries = kRows / HP;
  const int64_t groups = (a.n + kQueries - 1) / kQueries;
  const int64_t tiles = (a.width + kTile - 1) / kTile;
  // The row split over CTAs only where the query groups alone would leave multiprocessors idle
  // (a prefill of a few hundred tokens); each part stages the queries' fragments again.
  const int64_t want = 4 * static_cast<int64_t>(ctx.props().multiProcessorCount);
  const int64_t parts = std::clamp<int64_t>((want + groups - 1) / groups, 1, tiles);
  const int64_t per = (tiles + parts - 1) / parts;
  const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>((tiles + per - 1) / per));
  FD_LAUNCH((indexer_tc_kernel<HP, D>), grid, dim3(kThreads), 0, ctx.stream(), a, per, scores);
}

template <int D>
void launch_for_dim(DeviceContext& ctx, const IdxArgs& a, float* scores) {
  if (a.heads <= 16)
    launch<16, D>(ctx, a, scores);
  else if (a.heads <= 32)
    launch<32, D>(ctx, a, scores);
  else
    launch<64, D>(ctx, a, scores);
}

}  // namespace

bool indexer_scores_tc_fits(const IdxArgs& a) {
  return (a.dim == 64 || a.dim == 128) && a.heads >= 1 && a.heads <= 64 &&
         reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
}

void indexer_scores_tc(DeviceContext& ctx, const IdxArgs& a, float* scores) {
  FD_CHECK(indexer_scores_tc_fits(a), "indexer_scores_tc: heads " + std::to_string(a.heads) +
                                          ", head dim " + std::to_string(a.dim));
  if (a.n == 0 || a.width == 0) return;
  if (a.dim == 64)
    launch_for_dim<64>(ctx, a, scores);
  else
    launch_for_dim<128>(ctx, a, scores);
}

}  // namespace flashdesk::cuda
