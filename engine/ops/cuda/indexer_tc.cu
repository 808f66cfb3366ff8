// The indexer's scores of prefill-sized calls on the tensor cores (docs/numerics.md "Indexer";
// indexer.cu's CUDA-core kernel takes decode and the shapes this one does not). A CTA takes the
// A rows of 128 / HP queries (a row per (query, head), heads padded to HP = 16, 32 or 64: 128
// rows, a 16-row tile a warp, its fragments in registers for the whole kernel) and walks 64-entry
// key tiles of its part of the row:
//   1. the tile's FP4 keys decoded to BF16 into shared memory, once for every query and head (or
//      copied there from the call's keys decoded once: DecodedKeys);
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

#include "engine/ops/cuda/async_copy.cuh"
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

// One 4-byte word of entry s's codes (8 values, part `part` of D / 8), decoded as BF16 pairs, and
// the exponent range of its values reduced over the D / 8 lanes of the key (consecutive lanes:
// every lane of the warp calls this). Zeros past the cache.
template <int D>
__device__ __forceinline__ void decode_key_word(const IdxArgs& a, int64_t s, int part,
                                                uint32_t (&pairs)[4], int& lo, int& hi) {
  constexpr int kLanesPerKey = D / 8;
  constexpr int64_t kRowBytes = D / 2 + D / 32;
  uint32_t word = 0, scale = 0;
  if (s < a.entries) {
    const uint8_t* row = a.keys + s * kRowBytes;
    const uint8_t* c = row + 4 * part;
    word = kRowBytes % 4 == 0 ? load_aligned<uint32_t>(c)
                              : c[0] | (c[1] << 8) | (c[2] << 16) | (uint32_t{c[3]} << 24);
    scale = row[D / 2 + part / 4];
  }
  // The CUDA-core kernel's F32 key values, which BF16 holds exactly (two significant bits): one
  // BF16x2 multiply a pair where the scale keeps them normal, else through F32.
  if (!e2m1x8_pow2_to_bf16(word, scale, pairs)) {
    const float f = e8m0_to_f32(scale);
    FD_UNROLL
    for (int i = 0; i < 4; ++i)
      pairs[i] = pack_bf16_pair(f32_to_bf16_bits(e2m1_to_f32((word >> (8 * i)) & 0xFu) * f),
                                f32_to_bf16_bits(e2m1_to_f32((word >> (8 * i + 4)) & 0xFu) * f));
  }
  lo = kEmptyLo;
  hi = kEmptyHi;
  widen_by_codes(word, scale, lo, hi);
  FD_UNROLL
  for (int o = 1; o < kLanesPerKey; o <<= 1) {
    lo = imin(lo, __shfl_xor_sync(kFullMask, lo, o));
    hi = imax(hi, __shfl_xor_sync(kFullMask, hi, o));
  }
}

// Entries s0 .. s0 + 63 as BF16 rows of `keys` (zeros past the cache) and their exponent ranges;
// a lane decodes one 4-byte word of codes (8 values) at a time, D / 8 lanes a key.
template <int D>
__device__ __forceinline__ void stage_keys(const IdxArgs& a, int64_t s0, uint16_t* keys,
                                           int* key_lo, int* key_hi) {
  constexpr int kLanesPerKey = D / 8, kStride = D + kKeyPad;
  for (int u = static_cast<int>(threadIdx.x); u < kTile * kLanesPerKey; u += kThreads) {
    const int e = u / kLanesPerKey, part = u % kLanesPerKey;
    uint32_t pairs[4];
    int lo, hi;
    decode_key_word<D>(a, s0 + e, part, pairs, lo, hi);
    *reinterpret_cast<uint4*>(keys + e * kStride + 8 * part) =
        uint4{pairs[0], pairs[1], pairs[2], pairs[3]};
    if (part == 0) {
      key_lo[e] = lo;
      key_hi[e] = hi;
    }
  }
}

// The call's keys decoded once, before the scores (IndexKeys Decoded): every CTA whose queries
// see an entry decoded it again into its tile (about a thousand times an entry in an 8K-token
// prefill), so the pass writes rows as stage_keys stages them and the CTAs copy their tiles with
// cp.async, the next tile's copies in flight during this tile's products.
struct DecodedKeys {
  const uint16_t* keys;  // [rows, D] BF16: entry s's values, zeros past the cache
  const int* lo;         // [rows]: its exponent range (stage_keys' key_lo, key_hi)
  const int* hi;
};

// rows (whole tiles) of DecodedKeys, a lane a word of codes as in stage_keys.
template <int D>
__global__ void __launch_bounds__(kThreads)
    decode_keys_kernel(IdxArgs a, int64_t rows, uint16_t* keys, int* key_lo, int* key_hi) {
  FD_GRID_PROLOGUE();
  constexpr int kLanesPerKey = D / 8;
  // Whole warps stay in the loop (the range's shuffles); lanes past the rows write nothing.
  const int64_t u = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t s = u / kLanesPerKey;
  const int part = static_cast<int>(u % kLanesPerKey);
  uint32_t pairs[4];
  int lo, hi;
  decode_key_word<D>(a, s, part, pairs, lo, hi);
  if (s >= rows) return;
  *reinterpret_cast<uint4*>(keys + s * D + 8 * part) =
      uint4{pairs[0], pairs[1], pairs[2], pairs[3]};
  if (part == 0) {
    key_lo[s] = lo;
    key_hi[s] = hi;
  }
}

// Tile s0 .. s0 + 63 of the decoded keys into a tile buffer (the layout stage_keys writes), as
// one commit group of cp.async copies.
template <int D>
__device__ __forceinline__ void copy_tile(const DecodedKeys& dk, int64_t s0, uint16_t* keys,
                                          int* key_lo, int* key_hi) {
  constexpr int kChunksPerKey = D * 2 / 16, kStride = D + kKeyPad;
  constexpr int kKeyChunks = kTile * kChunksPerKey, kRangeChunks = kTile * 4 / 16;
  for (int u = static_cast<int>(threadIdx.x); u < kKeyChunks + 2 * kRangeChunks; u += kThreads) {
    if (u < kKeyChunks) {
      const int e = u / kChunksPerKey, c = u % kChunksPerKey;
      async_copy<16>(keys + e * kStride + 8 * c, dk.keys + (s0 + e) * D + 8 * c);
    } else {
      const int v = u - kKeyChunks, c = v % kRangeChunks;
      const bool high = v >= kRangeChunks;
      async_copy<16>((high ? key_hi : key_lo) + 4 * c, (high ? dk.hi : dk.lo) + s0 + 4 * c);
    }
  }
  async_commit();
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

// Where a CTA of either kernel starts: grid (query groups, parts of the row), CTA (x, y) taking
// the queries of group gridDim.x - 1 - x (the last queries, whose rows are longest, start first)
// and key tiles [first, last) = [y, y + 1) * tiles_per_cta, of which those from seen_last on are
// past every query's visible entries (-inf only). Fills the queries' visible counts (shared
// memory), A fragments and row ranges; ends with a barrier.
struct CtaTiles {
  int64_t t0, first, last, seen_last;
};

template <int HP, int D>
__device__ __forceinline__ CtaTiles start_cta(const IdxArgs& a, int64_t tiles_per_cta,
                                              int64_t* visible, uint32_t (&qf)[D / 32][2][4],
                                              RowInfo (&rows)[2]) {
  constexpr int kQueries = kRows / HP;
  CtaTiles c;
  c.t0 = (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kQueries;
  if (threadIdx.x < kQueries) {
    const int64_t t = c.t0 + threadIdx.x;
    visible[threadIdx.x] = t < a.n ? lmax(0, lmin(a.visible[t], a.entries)) : 0;
  }
  load_query<HP, D>(a, c.t0, qf, rows);
  __syncthreads();
  int64_t seen = 0;  // entries the CTA's queries see at most
  for (int i = 0; i < kQueries; ++i) seen = lmax(seen, visible[i]);
  const int64_t tiles = (a.width + kTile - 1) / kTile;
  c.first = static_cast<int64_t>(blockIdx.y) * tiles_per_cta;
  c.last = lmin(c.first + tiles_per_cta, tiles);
  c.seen_last = lmin(c.last, (seen + kTile - 1) / kTile);
  return c;
}

// Each CTA decodes the FP4 keys of the tiles its queries see (IndexKeys per tile).
template <int HP, int D>
__global__ void __launch_bounds__(kThreads, 2)
    indexer_tc_kernel(IdxArgs a, int64_t tiles_per_cta, float* scores) {
  FD_GRID_PROLOGUE();
  constexpr int kQueries = kRows / HP;
  __shared__ __align__(16) uint16_t keys[kTile * (D + kKeyPad)];  // 20 KiB at D = 128
  __shared__ __align__(16) uint16_t terms[kRows * kTermStride];   // 18 KiB
  __shared__ int key_lo[kTile], key_hi[kTile];
  __shared__ int64_t visible[kQueries];
  uint32_t qf[D / 32][2][4];
  RowInfo rows[2];
  const CtaTiles c = start_cta<HP, D>(a, tiles_per_cta, visible, qf, rows);
  for (int64_t tile = c.first; tile < c.seen_last; ++tile) {
    const int64_t s0 = tile * kTile;
    // The previous tile's mmas finished before its second barrier, so the keys may be replaced;
    // its head sums read the terms before this barrier, so they may be rewritten after it.
    stage_keys<D>(a, s0, keys, key_lo, key_hi);
    __syncthreads();
    stage_terms<HP, D>(a, c.t0, s0, qf, rows, keys, key_lo, key_hi, visible, terms);
    __syncthreads();
    sum_heads<HP>(a, c.t0, s0, visible, terms, scores);
  }
  for (int64_t tile = lmax(c.first, c.seen_last); tile < c.last; ++tile)
    write_unseen<HP>(a, c.t0, tile * kTile, scores);
}

// indexer_tc_kernel with the keys decoded once (DecodedKeys): the tiles seen by a query of the
// CTA are copied into two buffers in turn (dynamic shared memory: decoded_tile_bytes), tile + 1's
// copies issued before tile's products; the tiles past them only write -inf.
template <int D>
constexpr int64_t decoded_tile_bytes() {
  return 2 * (kTile * (D + kKeyPad) * int64_t{2} + 2 * kTile * int64_t{4});
}

template <int HP, int D>
__global__ void __launch_bounds__(kThreads, 2)
    indexer_tc_decoded_kernel(IdxArgs a, int64_t tiles_per_cta, DecodedKeys dk, float* scores) {
  FD_GRID_PROLOGUE();
  constexpr int kQueries = kRows / HP;
  constexpr int kKeyValues = kTile * (D + kKeyPad);
  FD_DYNAMIC_SMEM(uint16_t, smem);
  // Buffer b: keys at b * kKeyValues, then after both buffers' keys its lo and hi (kTile each).
  // (Pointers computed from b: arrays of them indexed by b went to the stack.)
  int* const ranges = reinterpret_cast<int*>(smem + 2 * kKeyValues);
  const auto keys = [&](int b) { return smem + b * kKeyValues; };
  const auto key_lo = [&](int b) { return ranges + 2 * kTile * b; };
  const auto key_hi = [&](int b) { return ranges + 2 * kTile * b + kTile; };
  __shared__ __align__(16) uint16_t terms[kRows * kTermStride];  // 18 KiB
  __shared__ int64_t visible[kQueries];
  uint32_t qf[D / 32][2][4];
  RowInfo rows[2];
  const CtaTiles c = start_cta<HP, D>(a, tiles_per_cta, visible, qf, rows);
  if (c.first < c.seen_last) copy_tile<D>(dk, c.first * kTile, keys(0), key_lo(0), key_hi(0));
  for (int64_t tile = c.first; tile < c.seen_last; ++tile) {
    const int b = static_cast<int>((tile - c.first) & 1);
    // Buffer b ^ 1 was last read by the previous tile's products, which ended before its second
    // barrier; the terms are rewritten after this tile's first, past the previous head sums.
    if (tile + 1 < c.seen_last) {
      copy_tile<D>(dk, (tile + 1) * kTile, keys(b ^ 1), key_lo(b ^ 1), key_hi(b ^ 1));
      async_wait<1>();
    } else {
      async_wait<0>();
    }
    __syncthreads();
    const int64_t s0 = tile * kTile;
    stage_terms<HP, D>(a, c.t0, s0, qf, rows, keys(b), key_lo(b), key_hi(b), visible, terms);
    __syncthreads();
    sum_heads<HP>(a, c.t0, s0, visible, terms, scores);
  }
  for (int64_t tile = lmax(c.first, c.seen_last); tile < c.last; ++tile)
    write_unseen<HP>(a, c.t0, tile * kTile, scores);
}

template <int HP, int D>
void launch(DeviceContext& ctx, const IdxArgs& a, float* scores, bool decoded_keys) {
  constexpr int64_t kQueries = kRows / HP;
  const int64_t groups = (a.n + kQueries - 1) / kQueries;
  const int64_t tiles = (a.width + kTile - 1) / kTile;
  // The row split over CTAs only where the query groups alone would leave multiprocessors idle
  // (a prefill of a few hundred tokens); each part stages the queries' fragments again.
  const int64_t want = 4 * static_cast<int64_t>(ctx.props().multiProcessorCount);
  const int64_t parts = std::clamp<int64_t>((want + groups - 1) / groups, 1, tiles);
  const int64_t per = (tiles + parts - 1) / parts;
  const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>((tiles + per - 1) / per));
  if (!decoded_keys) {
    FD_LAUNCH((indexer_tc_kernel<HP, D>), grid, dim3(kThreads), 0, ctx.stream(), a, per, scores);
    return;
  }
  // The keys every query may see, decoded to whole tiles (zeros and empty ranges past the cache).
  const int64_t rows = (a.entries + kTile - 1) / kTile * kTile;
  Tensor keys = ctx.scratch(DType::BF16, Shape{std::max<int64_t>(rows, 1), D});
  Tensor ranges = ctx.scratch(DType::I32, Shape{2, std::max<int64_t>(rows, 1)});
  int* const lo = ptr<int>(ranges);
  if (rows > 0)
    FD_LAUNCH((decode_keys_kernel<D>), dim3(blocks_for(rows * (D / 8), kThreads)), dim3(kThreads),
              0, ctx.stream(), a, rows, ptr<uint16_t>(keys), lo, lo + rows);
  const DecodedKeys dk{ptr<uint16_t>(keys), lo, lo + rows};
  constexpr size_t kSmem = static_cast<size_t>(decoded_tile_bytes<D>());
  allow_dynamic_smem<indexer_tc_decoded_kernel<HP, D>>(kSmem);
  FD_LAUNCH((indexer_tc_decoded_kernel<HP, D>), grid, dim3(kThreads), kSmem, ctx.stream(), a, per,
            dk, scores);
}

template <int D>
void launch_for_dim(DeviceContext& ctx, const IdxArgs& a, float* scores, bool decoded_keys) {
  if (a.heads <= 16)
    launch<16, D>(ctx, a, scores, decoded_keys);
  else if (a.heads <= 32)
    launch<32, D>(ctx, a, scores, decoded_keys);
  else
    launch<64, D>(ctx, a, scores, decoded_keys);
}

}  // namespace

bool indexer_scores_tc_fits(const IdxArgs& a) {
  return (a.dim == 64 || a.dim == 128) && a.heads >= 1 && a.heads <= 64 &&
         reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
}

void indexer_scores_tc(DeviceContext& ctx, const IdxArgs& a, float* scores, bool decoded_keys) {
  FD_CHECK(indexer_scores_tc_fits(a), "indexer_scores_tc: heads " + std::to_string(a.heads) +
                                          ", head dim " + std::to_string(a.dim));
  if (a.n == 0 || a.width == 0) return;
  if (a.dim == 64)
    launch_for_dim<64>(ctx, a, scores, decoded_keys);
  else
    launch_for_dim<128>(ctx, a, scores, decoded_keys);
}

}  // namespace flashdesk::cuda
