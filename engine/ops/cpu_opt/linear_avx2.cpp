// AVX2 linear layers: weights decoded to exact FP32 vectors on the fly (one or two tokens: a
// memory-bound GEMV) or into a panel reused by every token of a block (prefill: compute-bound),
// plus the FP8 act_quant of the input. BF16 / F32 weights accumulate each output in one 8-lane
// multiply-then-add chain over K summed in cpu::dot's tree; FP8 / FP4 weights do that per K-block
// of 32 and add the block sums in K order (cpu::blocked_dot, the official GEMM's order). Both
// give the reference's bits, and the same bits for any token count.
#include <algorithm>

#include "engine/ops/cpu_opt/linear_avx2.h"
#include "engine/ops/cpu_opt/simd_avx2.h"
#include "engine/util/numeric.h"
#include "engine/util/quant.h"

namespace flashdesk::cpu_opt::avx2 {
namespace {

// ---- weight formats: rows decoded to exact FP32 ------------------------------------------------
// block32(k0): the 32 weights of a full K-block at k0 (k0 % 32 == 0, k0 + 32 <= K).
// vec8(k0, n): the n <= 8 weights at k0 (k0 % 8 == 0), other lanes zero.

// Each format holds the weight's base pointers (read once per call, not per row).
struct Fp8Format {
  static constexpr bool kBlocked = true;  // sums by K-block of 32, as the official GEMM
  explicit Fp8Format(const LinearWeight& w)
      : in(w.in), codes(w.data.bytes()), scales(w.scale.bytes()), scale_cols(w.scale.dim(1)) {}
  int64_t in;
  const uint8_t* codes;
  const uint8_t* scales;
  int64_t scale_cols;
  struct Row {
    const uint8_t* codes;
    const uint8_t* scales;  // the scale row of this row's 32-row tile
  };
  Row row(int64_t o) const { return {codes + o * in, scales + (o / 32) * scale_cols}; }
  // The E4M3 decode gives value / 256; the factor goes into the block scale.
  static __m256 scale_of(const Row& r, int64_t k0) {
    return _mm256_set1_ps(e8m0(r.scales[k0 / 32]) * 256.0f);
  }
  void block32(const Row& r, int64_t k0, __m256 out[4]) const {
    const __m256 s = scale_of(r, k0);
    e4m3x16_div256(r.codes + k0, out[0], out[1]);
    e4m3x16_div256(r.codes + k0 + 16, out[2], out[3]);
    for (int v = 0; v < 4; ++v) out[v] = _mm256_mul_ps(out[v], s);
  }
  __m256 vec8(const Row& r, int64_t k0, int64_t n) const {
    uint8_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(tmp, r.codes + k0, static_cast<size_t>(n));
    return _mm256_mul_ps(e4m3x8_div256(tmp), scale_of(r, k0));
  }
};

// FP8 codes as value / 256, for an input already multiplied by 256 x the tile's block scales
// (decode: one multiply per input element per 32 rows instead of one per weight). The products
// are the same real numbers, so they round the same.
struct Fp8Unscaled : Fp8Format {
  explicit Fp8Unscaled(const Fp8Format& f) : Fp8Format(f) {}
  void block32(const Row& r, int64_t k0, __m256 out[4]) const {
    e4m3x16_div256(r.codes + k0, out[0], out[1]);
    e4m3x16_div256(r.codes + k0 + 16, out[2], out[3]);
  }
  __m256 vec8(const Row& r, int64_t k0, int64_t n) const {
    uint8_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(tmp, r.codes + k0, static_cast<size_t>(n));
    return e4m3x8_div256(tmp);
  }
};

struct Fp4Format {
  static constexpr bool kBlocked = true;
  explicit Fp4Format(const LinearWeight& w)
      : in(w.in), packed(w.data.bytes()), scales(w.scale.bytes()) {}
  int64_t in;
  const uint8_t* packed;
  const uint8_t* scales;
  struct Row {
    const uint8_t* packed;
    const uint8_t* scales;
  };
  Row row(int64_t o) const { return {packed + o * (in / 2), scales + o * (in / 32)}; }
  // The table holds twice the E2M1 value; the half goes into the scale.
  static __m256 half_scale(const Row& r, int64_t k0) {
    return _mm256_set1_ps(e8m0(r.scales[k0 / 32]) * 0.5f);
  }
  void block32(const Row& r, int64_t k0, __m256 out[4]) const {
    e2m1x32(r.packed + k0 / 2, half_scale(r, k0), out);
  }
  __m256 vec8(const Row& r, int64_t k0, int64_t n) const {
    float tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const float s = e8m0(r.scales[k0 / 32]);
    for (int64_t c = 0; c < n; ++c) {
      const uint8_t b = r.packed[(k0 + c) / 2];
      tmp[c] = e2m1_to_f32((k0 + c) % 2 ? e2m1_high(b) : e2m1_low(b)) * s;
    }
    return _mm256_loadu_ps(tmp);
  }
};

// A block-summed format (FP8, FP4) summed in one chain over K instead, as BF16 weights are
// (LinearJob::one_chain).
template <class F>
struct OneChain : F {
  static constexpr bool kBlocked = false;
  explicit OneChain(const LinearWeight& w) : F(w) {}
};

struct Bf16Format {
  static constexpr bool kBlocked = false;  // one chain over K
  explicit Bf16Format(const LinearWeight& w) : in(w.in), data(w.data.bytes()) {}
  int64_t in;
  const uint8_t* data;
  using Row = const uint8_t*;
  Row row(int64_t o) const { return data + 2 * o * in; }
  void block32(const Row& r, int64_t k0, __m256 out[4]) const {
    for (int v = 0; v < 4; ++v) out[v] = bf16x8(r + 2 * (k0 + 8 * v));
  }
  __m256 vec8(const Row& r, int64_t k0, int64_t n) const {
    uint8_t tmp[16] = {};
    std::memcpy(tmp, r + 2 * k0, static_cast<size_t>(2 * n));
    return bf16x8(tmp);
  }
};

struct F32Format {
  static constexpr bool kBlocked = false;
  explicit F32Format(const LinearWeight& w)
      : in(w.in), data(reinterpret_cast<const float*>(w.data.bytes())) {}
  int64_t in;
  const float* data;
  using Row = const float*;
  Row row(int64_t o) const { return data + o * in; }
  void block32(const Row& r, int64_t k0, __m256 out[4]) const {
    for (int v = 0; v < 4; ++v) out[v] = _mm256_loadu_ps(r + k0 + 8 * v);
  }
  __m256 vec8(const Row& r, int64_t k0, int64_t n) const {
    return n == 8 ? _mm256_loadu_ps(r + k0) : load_partial(r + k0, n);
  }
};

void store_output(const LinearJob& j, int64_t i, int64_t o, float v) {
  j.y[i * j.y_stride + o] = j.round_bf16 ? flashdesk::round_bf16(v) : v;
}

// ---- direct path: MR tokens x NR rows, weights decoded once per call -------------------------

template <int MR, int NR, class F>
void direct_tile(const F& f, const LinearJob& j, int64_t i0, int64_t o0) {
  const int64_t K = f.in;
  typename F::Row rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = f.row(o0 + r);
  __m256 acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) acc[m][r] = _mm256_setzero_ps();
  const float* x = j.x + i0 * j.x_stride;
  int64_t k0 = 0;
  // Fully unrolled over rows and tokens so the MR x NR accumulators stay in registers and the
  // NR independent chains overlap (one chain per output is the reference's summation order).
  for (; k0 + 32 <= K; k0 += 32)
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      __m256 w[4];
      f.block32(rows[r], k0, w);
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v)
          acc[m][r] = mul_add(acc[m][r], _mm256_loadu_ps(x + m * j.x_stride + k0 + 8 * v), w[v]);
    }
  for (; k0 < K; k0 += 8)
    for (int r = 0; r < NR; ++r) {
      const __m256 w = f.vec8(rows[r], k0, std::min<int64_t>(8, K - k0));
      for (int m = 0; m < MR; ++m)
        acc[m][r] = mul_add(acc[m][r], _mm256_loadu_ps(x + m * j.x_stride + k0), w);
    }
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) store_output(j, i0 + m, o0 + r, hsum(acc[m][r]));
}

// The same tile for FP8 / FP4 weights, summed as cpu::blocked_dot: per K-block of 32 one chain
// per output from zero, its lanes reduced in cpu::dot's tree (all MR x NR <= 8 outputs of the
// tile in one hsum8), and the block sums added to the outputs' totals in K order.
template <int MR, int NR, class F>
void blocked_tile(const F& f, const LinearJob& j, int64_t i0, int64_t o0) {
  static_assert(MR * NR <= 8, "one hsum8 per block");
  const int64_t K = f.in;
  typename F::Row rows[NR];
  for (int r = 0; r < NR; ++r) rows[r] = f.row(o0 + r);
  const float* x = j.x + i0 * j.x_stride;
  __m256 total = _mm256_setzero_ps();  // lane m * NR + r: output (token m, row r)
  for (int64_t k0 = 0; k0 < K; k0 += 32) {
    __m256 part[8];
    for (int v = MR * NR; v < 8; ++v) part[v] = _mm256_setzero_ps();
    if (k0 + 32 <= K) {
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        __m256 w[4];
        f.block32(rows[r], k0, w);
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) {
          __m256 acc = _mm256_setzero_ps();
#pragma GCC unroll 4
          for (int v = 0; v < 4; ++v)
            acc = mul_add(acc, _mm256_loadu_ps(x + m * j.x_stride + k0 + 8 * v), w[v]);
          part[m * NR + r] = acc;
        }
      }
    } else {  // a last, partial block (x is zero-padded to a multiple of 8)
      for (int r = 0; r < NR; ++r)
        for (int m = 0; m < MR; ++m) {
          __m256 acc = _mm256_setzero_ps();
          for (int64_t k = k0; k < K; k += 8)
            acc = mul_add(acc, _mm256_loadu_ps(x + m * j.x_stride + k),
                          f.vec8(rows[r], k, std::min<int64_t>(8, K - k)));
          part[m * NR + r] = acc;
        }
    }
    total = _mm256_add_ps(total, hsum8(part));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, total);
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) store_output(j, i0 + m, o0 + r, out[m * NR + r]);
}

// Rows [o_begin, o_end) for MR tokens starting at i0: groups of NR rows, then single rows.
template <int MR, int NR, class F>
void direct_rows(const F& f, const LinearJob& j, int64_t i0, int64_t o_begin, int64_t o_end) {
  int64_t o = o_begin;
  if constexpr (F::kBlocked) {
    for (; o + NR <= o_end; o += NR) blocked_tile<MR, NR>(f, j, i0, o);
    for (; o < o_end; ++o) blocked_tile<MR, 1>(f, j, i0, o);
  } else {
    for (; o + NR <= o_end; o += NR) direct_tile<MR, NR>(f, j, i0, o);
    for (; o < o_end; ++o) direct_tile<MR, 1>(f, j, i0, o);
  }
}

// ---- panel path: a panel of P rows x KC columns decoded once per block of NB tokens ----------

constexpr int64_t kPanelRows = 16, kPanelCols = 256, kTokenBlock = 96;

template <class F>
void decode_panel(const F& f, int64_t o0, int64_t rows, int64_t k0, int64_t k1, float* wc) {
  for (int64_t r = 0; r < kPanelRows; ++r) {
    float* dst = wc + r * kPanelCols;
    if (r >= rows) {
      std::fill(dst, dst + kPanelCols, 0.0f);
      continue;
    }
    const auto row = f.row(o0 + r);
    int64_t k = k0;
    for (; k + 32 <= k1; k += 32) {
      __m256 w[4];
      f.block32(row, k, w);
      for (int v = 0; v < 4; ++v) _mm256_storeu_ps(dst + (k - k0) + 8 * v, w[v]);
    }
    for (; k < k1; k += 8)
      _mm256_storeu_ps(dst + (k - k0), f.vec8(row, k, std::min<int64_t>(8, k1 - k)));
  }
}

// MR tokens x 4 panel rows over nvec vectors; acc (8 lanes per output, token stride
// kPanelRows * 8) is continued, or started when `first`.
template <int MR>
void panel_tile(const float* x, int64_t xs, const float* wc, int64_t nvec, float* acc, bool first) {
  __m256 a[MR][4];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < 4; ++r)
      a[m][r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + (m * kPanelRows + r) * 8);
  for (int64_t v = 0; v < nvec; ++v) {
    __m256 xv[MR];
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) xv[m] = _mm256_loadu_ps(x + m * xs + 8 * v);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m256 w = _mm256_loadu_ps(wc + r * kPanelCols + 8 * v);
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) a[m][r] = mul_add(a[m][r], xv[m], w);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < 4; ++r) _mm256_storeu_ps(acc + (m * kPanelRows + r) * 8, a[m][r]);
}

// Per-thread buffers (plain arrays: this file instantiates no library templates, so no
// AVX2-compiled copy of a shared inline function can reach the baseline code at link time).
struct PanelScratch {
  alignas(32) float wc[kPanelRows * kPanelCols];
  alignas(32) float acc[kTokenBlock * kPanelRows * 8];
};

template <class F>
void panel_block(const F& f, const LinearJob& j, int64_t i0, int64_t nb, int64_t o0, int64_t rows,
                 PanelScratch& s) {
  const int64_t K = f.in;
  for (int64_t k0 = 0; k0 < K; k0 += kPanelCols) {
    const int64_t k1 = std::min(K, k0 + kPanelCols), nvec = (k1 - k0 + 7) / 8;
    decode_panel(f, o0, rows, k0, k1, s.wc);
    for (int64_t im = 0; im < nb; im += 3) {
      const float* x = j.x + (i0 + im) * j.x_stride + k0;
      for (int64_t rg = 0; rg < rows; rg += 4) {
        const float* wc = s.wc + rg * kPanelCols;
        float* acc = s.acc + (im * kPanelRows + rg) * 8;
        switch (std::min<int64_t>(3, nb - im)) {
          case 3:
            panel_tile<3>(x, j.x_stride, wc, nvec, acc, k0 == 0);
            break;
          case 2:
            panel_tile<2>(x, j.x_stride, wc, nvec, acc, k0 == 0);
            break;
          default:
            panel_tile<1>(x, j.x_stride, wc, nvec, acc, k0 == 0);
        }
      }
    }
  }
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t r = 0; r < rows; ++r)
      store_output(j, i0 + i, o0 + r, hsum(_mm256_loadu_ps(s.acc + (i * kPanelRows + r) * 8)));
}

// FP8 / FP4 weights on the panel: MR <= 2 tokens x 4 panel rows, per K-block of 32 one chain per
// output from zero, reduced by one hsum8, added to the 8 totals (lane m * 4 + r), which carry
// over panel chunks in `totals` (cpu::blocked_dot's order; kPanelCols is a multiple of 32).
template <int MR>
void panel_tile_blocked(const float* x, int64_t xs, const float* wc, int64_t nvec, float* totals,
                        bool first) {
  __m256 total = first ? _mm256_setzero_ps() : _mm256_loadu_ps(totals);
  for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
    const int64_t nv = std::min<int64_t>(4, nvec - v0);
    __m256 part[8];
    for (int v = 0; v < 8; ++v) part[v] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r)
#pragma GCC unroll 2
      for (int m = 0; m < MR; ++m) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t v = 0; v < nv; ++v)
          acc = mul_add(acc, _mm256_loadu_ps(x + m * xs + 8 * (v0 + v)),
                        _mm256_loadu_ps(wc + r * kPanelCols + 8 * (v0 + v)));
        part[m * 4 + r] = acc;
      }
    total = _mm256_add_ps(total, hsum8(part));
  }
  _mm256_storeu_ps(totals, total);
}

template <class F>
void panel_block_blocked(const F& f, const LinearJob& j, int64_t i0, int64_t nb, int64_t o0,
                         int64_t rows, PanelScratch& s) {
  const int64_t K = f.in;
  for (int64_t k0 = 0; k0 < K; k0 += kPanelCols) {
    const int64_t k1 = std::min(K, k0 + kPanelCols), nvec = (k1 - k0 + 7) / 8;
    decode_panel(f, o0, rows, k0, k1, s.wc);
    for (int64_t im = 0; im < nb; im += 2) {
      const float* x = j.x + (i0 + im) * j.x_stride + k0;
      for (int64_t rg = 0; rg < rows; rg += 4) {
        float* totals = s.acc + ((im / 2) * (kPanelRows / 4) + rg / 4) * 8;
        if (nb - im >= 2)
          panel_tile_blocked<2>(x, j.x_stride, s.wc + rg * kPanelCols, nvec, totals, k0 == 0);
        else
          panel_tile_blocked<1>(x, j.x_stride, s.wc + rg * kPanelCols, nvec, totals, k0 == 0);
      }
    }
  }
  for (int64_t im = 0; im < nb; im += 2)
    for (int64_t rg = 0; rg < rows; rg += 4) {
      const float* totals = s.acc + ((im / 2) * (kPanelRows / 4) + rg / 4) * 8;
      for (int64_t m = 0; m < std::min<int64_t>(2, nb - im); ++m)
        for (int64_t r = 0; r < std::min<int64_t>(4, rows - rg); ++r)
          store_output(j, i0 + im + m, o0 + rg + r, totals[m * 4 + r]);
    }
}

template <class F>
void run_rows(const F& f, const LinearJob& j, int64_t o_begin, int64_t o_end) {
  if (j.n == 1) return direct_rows<1, 8>(f, j, 0, o_begin, o_end);
  if (j.n == 2) return direct_rows<2, 4>(f, j, 0, o_begin, o_end);
  thread_local PanelScratch scratch;
  for (int64_t i0 = 0; i0 < j.n; i0 += kTokenBlock)
    for (int64_t o0 = o_begin; o0 < o_end; o0 += kPanelRows) {
      const int64_t nb = std::min(kTokenBlock, j.n - i0), rows = std::min(kPanelRows, o_end - o0);
      if constexpr (F::kBlocked)
        panel_block_blocked(f, j, i0, nb, o0, rows, scratch);
      else
        panel_block(f, j, i0, nb, o0, rows, scratch);
    }
}

// ---- FP8 decode: block scales folded into the input ------------------------------------------

constexpr int64_t kFoldFloats = 32768;

// out = x * 256 * scale[k / 32] for the job's tokens (one 32-row tile's scale row). False when a
// product is not exact (it under- or overflowed): then the weights keep their scales.
bool fold_scales(const LinearJob& j, const uint8_t* tile_scales, int64_t k, float* out) {
  __m256 exact = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  for (int64_t i = 0; i < j.n; ++i) {
    const float* x = j.x + i * j.x_stride;
    float* o = out + i * j.x_stride;
    for (int64_t k0 = 0; k0 < j.x_stride; k0 += 8) {
      const float s = e8m0(tile_scales[std::min(k0, k - 1) / 32]) * 256.0f;
      const __m256 v = _mm256_loadu_ps(x + k0);
      const __m256 p = _mm256_mul_ps(v, _mm256_set1_ps(s));
      const __m256 back = _mm256_mul_ps(p, _mm256_set1_ps(1.0f / s));
      exact = _mm256_and_ps(exact, _mm256_cmp_ps(back, v, _CMP_EQ_OQ));
      _mm256_storeu_ps(o + k0, p);
    }
  }
  return _mm256_movemask_ps(exact) == 0xFF;
}

template <class F>
void run_direct(const F& f, const LinearJob& j, int64_t o_begin, int64_t o_end) {
  if (j.n == 1)
    direct_rows<1, 8>(f, j, 0, o_begin, o_end);
  else
    direct_rows<2, 4>(f, j, 0, o_begin, o_end);
}

// One or two tokens: per 32-row tile, the input times the tile's scales, then unscaled codes.
void run_fp8(const Fp8Format& f, const LinearJob& j, int64_t o_begin, int64_t o_end) {
  if (j.n > 2 || j.n * j.x_stride > kFoldFloats) return run_rows(f, j, o_begin, o_end);
  alignas(32) thread_local float folded[kFoldFloats];
  for (int64_t t0 = o_begin; t0 < o_end;) {
    const int64_t t1 = std::min(o_end, (t0 / 32 + 1) * 32);
    LinearJob jt = j;
    jt.x = folded;
    if (fold_scales(j, f.scales + (t0 / 32) * f.scale_cols, f.in, folded))
      run_direct(Fp8Unscaled(f), jt, t0, t1);
    else
      run_direct(f, j, t0, t1);
    t0 = t1;
  }
}

// ---- act_quant --------------------------------------------------------------------------------

// One full block of 32: the reference quantiser's arithmetic, vectorised (docs/numerics.md).
void act_quant_block32(const float* x, float* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4], amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), amax);  // NaN ignored, as std::max
  }
  const uint8_t code = e8m0_ceil_code(std::max(hmax(amax), 1e-4f) * (1.0f / 448.0f));
  if (code < 2 || code > 252) {  // outside any real activation range: the scalar path
    std::memcpy(out, x, 32 * sizeof(float));
    fake_quant_fp8(out, 32, 32);
    return;
  }
  const __m256 scale = _mm256_set1_ps(e8m0(code));
  const __m256 inv = _mm256_set1_ps(e8m0(static_cast<uint8_t>(254 - code)));  // exact 1/scale
  const __m256 lim = _mm256_set1_ps(448.0f), magic = _mm256_set1_ps(0x1p14f);
  const __m256 min_normal = _mm256_set1_ps(0x1p-6f);
  for (int i = 0; i < 4; ++i) {
    // clamp(x / scale, ±448) with NaN passed through (min / max return their second operand
    // when one is NaN).
    const __m256 s = _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), lim),
                                   _mm256_min_ps(lim, _mm256_mul_ps(v[i], inv)));
    const __m256 a = _mm256_andnot_ps(sign, s);
    // Subnormal E4M3 range: multiples of 2^-9, rounded to nearest even by adding 2^14.
    const __m256 sub = _mm256_sub_ps(_mm256_add_ps(a, magic), magic);
    // Normal range: round the FP32 mantissa to 3 bits, ties to even.
    const __m256i u = _mm256_castps_si256(a);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 20), _mm256_set1_epi32(1));
    const __m256i nu =
        _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), lsb)),
                         _mm256_set1_epi32(static_cast<int>(0xFFF00000u)));
    const __m256 r =
        _mm256_blendv_ps(_mm256_castsi256_ps(nu), sub, _mm256_cmp_ps(a, min_normal, _CMP_LT_OQ));
    _mm256_storeu_ps(out + 8 * i, _mm256_mul_ps(_mm256_or_ps(r, _mm256_and_ps(s, sign)), scale));
  }
}

}  // namespace

void act_quant_row(const float* x, int64_t k, float* out) {
  int64_t b = 0;
  for (; b + 32 <= k; b += 32) act_quant_block32(x + b, out + b);
  if (b < k) {
    if (out != x) std::memcpy(out + b, x + b, static_cast<size_t>(k - b) * sizeof(float));
    fake_quant_fp8(out + b, static_cast<size_t>(k - b), 32);
  }
}

void linear_rows(const LinearJob& j, int64_t o_begin, int64_t o_end) {
  const LinearWeight& w = *j.w;
  switch (w.format) {
    case WeightFormat::Fp8Block:
      if (w.block != 32) unsupported_weight(w);
      if (j.one_chain) return run_rows(OneChain<Fp8Format>{w}, j, o_begin, o_end);
      return run_fp8(Fp8Format{w}, j, o_begin, o_end);
    case WeightFormat::Fp4Row:
      if (w.block != 32 || w.in % 32 != 0) unsupported_weight(w);
      if (j.one_chain) return run_rows(OneChain<Fp4Format>{w}, j, o_begin, o_end);
      return run_rows(Fp4Format{w}, j, o_begin, o_end);
    case WeightFormat::Bf16:
      return run_rows(Bf16Format{w}, j, o_begin, o_end);
    case WeightFormat::F32:
      return run_rows(F32Format{w}, j, o_begin, o_end);
  }
}

}  // namespace flashdesk::cpu_opt::avx2
