// AVX-512 GEMV of FP4 weights (packed E2M1, one E8M0 scale per 32 along K) for one or two tokens:
// the decode step of routed experts held in host memory (hybrid placement, docs/placement.md),
// which should run at the speed the weights stream in from DRAM (docs/cpu-optimized.md).
//
// Layout: a 512-bit register holds two weight rows, 8 lanes each (lanes 0-7 row r, lanes 8-15 row
// r + 1), and lane j is cpu::dot's partial sum j of its row. Per K-block of 32 a lane adds the
// products of elements j, j + 8, j + 16, j + 24 in that order; the lanes of 16 rows are then
// reduced in cpu::dot's tree at once and added to the rows' totals in K order (cpu::blocked_dot).
// So the outputs carry the reference's bits, as every kernel of this backend does.
//
// Decode without widening: the codes of elements 8v..8v+7 of a block are the four bytes at 4v, one
// 32-bit word with code j in bits 4j..4j+3. That word of row r is broadcast to lanes 0-7 and row
// r + 1's to lanes 8-15 and shifted right by 4 * (lane % 8); a permute then reads each lane's
// value from a table indexed by the low bits. Two ways to apply the block scales:
// - Scaled after (the fast path): the table holds the 16 E2M1 values (a 16-entry permute reads only
//   bits 0-3 of the index); each row's block scale multiplies its 8 lane sums at the end of the
//   block. A power of two commutes with every rounding while all values stay in the normal range,
//   so those are the reference's lane sums exactly; scale_after_is_exact checks that range.
// - Scaled tables: the index is cut to 4 bits and tagged with 16 in the upper half, and a
//   two-table permute reads [the 16 values times row r's scale | times row r + 1's], the
//   reference's dequantised weights themselves. Exact for any input; one more integer op per 16
//   weights and two table multiplies per block and pair.
#include <immintrin.h>

// GCC 12's AVX-512 headers make their "undefined" vectors by self-initialisation
// (`__m512 __Y = __Y;`, GCC bug 105593), which its uninitialised-use warnings flag wherever such an
// intrinsic is inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/ops/cpu_opt/linear_avx2.h"
#include "engine/ops/cpu_opt/linear_avx512.h"
#include "engine/util/numeric.h"

namespace flashdesk::cpu_opt::avx512 {
namespace {

constexpr int kMaxPairs = 8;          // register pairs of rows per pass (16 rows)
constexpr int64_t kChunkBlocks = 16;  // K-blocks whose scales are decoded together
// How far ahead of the block being summed each row's bytes are prefetched (Zen 5, one core from
// DRAM: 128 to 256 bytes alike, 512 and more slower).
constexpr int64_t kPrefetchBytes = 256;

// The FP4 weight's base pointers.
struct Fp4Weight {
  const uint8_t* packed;  // [out, in / 2], low nibble = even column
  const uint8_t* scales;  // [out, in / 32] E8M0 codes
  int64_t in;
};

// The magnitude range of one token's input: the smallest non-zero |x| and the largest.
struct InputRange {
  float min_nonzero = 0x1p127f, max = 0.0f;
  bool finite = true;
};

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 2^e as a double, for -1022 <= e <= 1023.
double pow2(int e) {
  const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52;
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

InputRange input_range(const float* x, int64_t k) {
  __m512 lo = _mm512_set1_ps(0x1p127f), hi = _mm512_setzero_ps();
  __mmask16 nan = 0;
  for (int64_t c = 0; c < k; c += 16) {
    const __mmask16 in = k - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - c)) - 1);
    const __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(in, x + c));
    nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    hi = _mm512_max_ps(hi, a);
    lo = _mm512_mask_min_ps(lo, _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_GT_OQ), lo, a);
  }
  return {_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi), nan == 0};
}

// Whether scaling the lane sums after the block gives the reference's lane sums for block scale
// codes in [code_min, code_max]: every non-zero product |x| * |e2m1| * s and |x| * |e2m1| (e2m1
// magnitudes 0.5 to 6) is normal, and no sum of 32 of them, with or without s, can overflow. Then
// each product rounds the same with and without the power of two, and so does each addition (a
// sum that leaves the normal range is exact in both). Real activations and scales are far inside
// this; the scaled tables take the rest.
bool scale_after_is_exact(const InputRange& x, int code_min, int code_max) {
  if (!x.finite || code_min == 0) return false;
  const double s_min = pow2(code_min < 127 ? code_min - 127 : 0);
  const double s_max = pow2(code_max > 127 ? code_max - 127 : 0);
  return double{x.min_nonzero} * 0.5 * s_min >= 0x1p-126 &&
         double{x.max} * 192.0 * s_max <= 0x1p127;
}

// The smallest and largest scale code of `rows` consecutive weight rows.
void scale_code_range(const Fp4Weight& w, int64_t o0, int64_t rows, int& code_min, int& code_max) {
  const uint8_t* p = w.scales + o0 * (w.in / 32);
  const int64_t n = rows * (w.in / 32);
  __m512i lo = _mm512_set1_epi8(-1), hi = _mm512_setzero_si512();
  for (int64_t c = 0; c < n; c += 64) {
    const __mmask64 in = n - c >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - c)) - 1;
    lo = _mm512_min_epu8(lo, _mm512_mask_loadu_epi8(_mm512_set1_epi8(-1), in, p + c));
    hi = _mm512_max_epu8(hi, _mm512_maskz_loadu_epi8(in, p + c));
  }
  alignas(64) uint8_t l[64], h[64];
  _mm512_store_si512(l, lo);
  _mm512_store_si512(h, hi);
  code_min = 255;
  code_max = 0;
  for (int i = 0; i < 64; ++i) {
    code_min = l[i] < code_min ? l[i] : code_min;
    code_max = h[i] > code_max ? h[i] : code_max;
  }
}

// Prefetches the line kPrefetchBytes ahead of byte `at` of each of the `rows` rows (a line holds
// four blocks of a row, so once every four blocks); past a row's end, the same row of the next
// pass, which starts `rows` rows later (rows are contiguous). 16 streams are more than the
// hardware prefetcher keeps ahead of, and it does not guess the next pass: 5.7 -> 12.7 GB/s on one
// core of Zen 5 (an expert's w1 from DRAM). Addresses past the weight are harmless to prefetch.
void prefetch_ahead(const uint8_t* const* packed, int rows, int64_t row_bytes, int64_t at) {
  int64_t ahead = at + kPrefetchBytes;
  if (ahead >= row_bytes) ahead += (rows - 1) * row_bytes;
  for (int r = 0; r < rows; ++r)
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(packed[r]) + ahead),
                 _MM_HINT_T0);
}

// Up to 16 E8M0 codes (the lanes of `mask`) as 2^(code - 127) in FP32, code 0 as 2^-127 (a
// subnormal), as e8m0_to_f32.
__m512 e8m0x16(const uint8_t* codes, __mmask16 mask) {
  const __m512i c = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, codes));
  const __mmask16 zero = _mm512_cmpeq_epi32_mask(c, _mm512_setzero_si512());
  return _mm512_castsi512_ps(
      _mm512_mask_mov_epi32(_mm512_slli_epi32(c, 23), zero, _mm512_set1_epi32(0x00400000)));
}

// cpu::dot's tree over each row's 8 lanes for 16 rows at once; a[p] holds rows 2p (lanes 0-7) and
// 2p + 1 (lanes 8-15). Lane 4q + k of the result is row 4k + q's
// ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)), each addition with the reference's operands.
// Always inlined: as a call it took 9% of the GEMV's time (its 8 inputs went through memory).
[[gnu::always_inline]] inline __m512 tree16(const __m512 a[kMaxPairs]) {
  __m512 s[4];  // 128-bit lane q of s[i]: row 4i + q's four sums l_j + l_(j+4)
  for (int i = 0; i < 4; ++i)
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  __m512 t[2];  // per 128-bit lane: [s(2i) pair sums (0+1), (2+3) | s(2i+1) pair sums]
  for (int i = 0; i < 2; ++i)
    t[i] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// tree16's lanes back in row order.
__m512 rows_in_order(__m512 v) {
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), v);
}

// Outputs of rows [o0, o0 + rows) (rows <= 2 * PAIRS) for MR tokens, with the block scales
// applied after the lane sums (kScaleAfter) or in the tables. Rows past the end repeat the last
// one (read, not stored), so a partial pass needs no other code.
template <int MR, int PAIRS, bool kScaleAfter>
void fp4_pass(const Fp4Weight& w, const LinearJob& j, int64_t o0, int64_t rows) {
  constexpr int R = 2 * PAIRS;
  const uint8_t* packed[R];
  const uint8_t* scales[R];
  for (int r = 0; r < R; ++r) {
    const int64_t o = o0 + std::min<int64_t>(r, rows - 1);
    packed[r] = w.packed + o * (w.in / 2);
    scales[r] = w.scales + o * (w.in / 32);
  }
  const __m512 values = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f,
                                       -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
  const __m512i shifts =
      _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i low4 = _mm512_set1_epi32(0xF);
  const __m512i upper_tag =
      _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);
  __m512 total[MR];
  for (int m = 0; m < MR; ++m) total[m] = _mm512_setzero_ps();
  const int64_t blocks = w.in / 32;
  // The lines up to kPrefetchBytes into each row (the first pass of a task finds them uncached;
  // later passes had them prefetched by the pass before).
  for (int r = 0; r < R; ++r)
    for (int64_t at = 64; at < std::min(kPrefetchBytes, w.in / 2); at += 64)
      _mm_prefetch(reinterpret_cast<const char*>(packed[r] + at), _MM_HINT_T0);
  alignas(64) float block_scale[R][kChunkBlocks];
  for (int64_t c0 = 0; c0 < blocks; c0 += kChunkBlocks) {
    const int64_t nb = std::min(kChunkBlocks, blocks - c0);
    const __mmask16 mask = static_cast<__mmask16>((1u << nb) - 1);
    for (int r = 0; r < R; ++r) _mm512_store_ps(block_scale[r], e8m0x16(scales[r] + c0, mask));
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t k0 = (c0 + b) * 32;
      if (b % 4 == 0) prefetch_ahead(packed, R, w.in / 2, k0 / 2);
      __m512 xv[MR][4];  // the 8 inputs of each element group, in both halves
      for (int m = 0; m < MR; ++m)
        for (int v = 0; v < 4; ++v)
          xv[m][v] = _mm512_broadcast_f32x8(_mm256_loadu_ps(j.x + m * j.x_stride + k0 + 8 * v));
      __m512 acc[MR][kMaxPairs];
      for (int m = 0; m < MR; ++m)
        for (int p = PAIRS; p < kMaxPairs; ++p) acc[m][p] = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int p = 0; p < PAIRS; ++p) {
        const float* s_lo = &block_scale[2 * p][b];
        const float* s_hi = &block_scale[2 * p + 1][b];
        __m512 lo = values, hi = values;
        if constexpr (!kScaleAfter) {
          lo = _mm512_mul_ps(values, _mm512_set1_ps(*s_lo));
          hi = _mm512_mul_ps(values, _mm512_set1_ps(*s_hi));
        }
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          __m512i idx =
              _mm512_set1_epi32(static_cast<int>(load_u32(packed[2 * p] + k0 / 2 + 4 * v)));
          idx = _mm512_mask_set1_epi32(
              idx, 0xFF00, static_cast<int>(load_u32(packed[2 * p + 1] + k0 / 2 + 4 * v)));
          idx = _mm512_srlv_epi32(idx, shifts);
          __m512 wv;
          if constexpr (kScaleAfter) {
            wv = _mm512_permutexvar_ps(idx, values);  // reads bits 0-3 of each index
          } else {
            // (idx & 15) | tag: 0xEA is the ternary-logic table of (a & b) | c.
            idx = _mm512_ternarylogic_epi32(idx, low4, upper_tag, 0xEA);
            wv = _mm512_permutex2var_ps(lo, idx, hi);
          }
#pragma GCC unroll 2
          for (int m = 0; m < MR; ++m) {
            // The chain starts at the first product rather than at 0 + product: that can only
            // turn a +0 lane into -0, which the total (from +0) absorbs.
            const __m512 prod = _mm512_mul_ps(xv[m][v], wv);
            acc[m][p] = v == 0 ? prod : _mm512_add_ps(acc[m][p], prod);
          }
        }
        if constexpr (kScaleAfter) {
          const __m512 s =
              _mm512_mask_broadcastss_ps(_mm512_set1_ps(*s_lo), 0xFF00, _mm_load_ss(s_hi));
          for (int m = 0; m < MR; ++m) acc[m][p] = _mm512_mul_ps(acc[m][p], s);
        }
      }
      for (int m = 0; m < MR; ++m) total[m] = _mm512_add_ps(total[m], tree16(acc[m]));
    }
  }
  for (int m = 0; m < MR; ++m) {
    alignas(64) float out[16];
    _mm512_store_ps(out, rows_in_order(total[m]));
    float* y = j.y + m * j.y_stride + o0;
    for (int64_t r = 0; r < rows; ++r) y[r] = j.round_bf16 ? flashdesk::round_bf16(out[r]) : out[r];
  }
}

// Rows [o_begin, o_end) in passes of 2 * PAIRS rows, each on the fast path when its scale codes
// allow it for the input range of every token.
template <int MR, int PAIRS>
void fp4_rows(const Fp4Weight& w, const LinearJob& j, int64_t o_begin, int64_t o_end) {
  InputRange x;
  for (int m = 0; m < MR; ++m) {
    const InputRange r = input_range(j.x + m * j.x_stride, w.in);
    x = {std::min(x.min_nonzero, r.min_nonzero), std::max(x.max, r.max), x.finite && r.finite};
  }
  for (int64_t o = o_begin; o < o_end; o += 2 * PAIRS) {
    const int64_t rows = std::min<int64_t>(2 * PAIRS, o_end - o);
    int code_min = 0, code_max = 0;
    scale_code_range(w, o, rows, code_min, code_max);
    if (scale_after_is_exact(x, code_min, code_max))
      fp4_pass<MR, PAIRS, true>(w, j, o, rows);
    else
      fp4_pass<MR, PAIRS, false>(w, j, o, rows);
  }
}

}  // namespace

void linear_rows(const LinearJob& j, int64_t o_begin, int64_t o_end) {
  const LinearWeight& w = *j.w;
  if (w.format != WeightFormat::Fp4Row || j.n > 2 || j.one_chain)
    return avx2::linear_rows(j, o_begin, o_end);
  if (w.block != 32 || w.in % 32 != 0) unsupported_weight(w);
  const Fp4Weight f{w.data.bytes(), w.scale.bytes(), w.in};
  if (j.n == 1)
    fp4_rows<1, 8>(f, j, o_begin, o_end);
  else  // two tokens share each decoded weight; 8 rows keep the accumulators in registers
    fp4_rows<2, 4>(f, j, o_begin, o_end);
}

}  // namespace flashdesk::cpu_opt::avx512
