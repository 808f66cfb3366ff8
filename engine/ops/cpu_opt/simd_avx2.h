// AVX2 + F16C building blocks of the optimised CPU kernels: multiply-add and horizontal sums in
// the reference's order, BF16 rounding with the reference's bits, decoding of the narrow formats.
// Include only from *_avx2.cpp files (the only ones compiled with these instructions). Static:
// a copy the compiler does not inline stays private to its file, never a weak symbol the linker
// could pick for baseline code (cmake/CheckIsaObjects.cmake).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace flashdesk::cpu_opt::avx2 {

// acc + a * b with two roundings, as the reference's `acc[j] += a[i] * b[i]` (this file is built
// with -ffp-contract=off, so the compiler does not fuse them either).
static inline __m256 mul_add(__m256 acc, __m256 a, __m256 b) {
  return _mm256_add_ps(acc, _mm256_mul_ps(a, b));
}

// Sum of 8 lanes in the reference's tree (cpu::dot): ((l0 + l4) + (l1 + l5)) +
// ((l2 + l6) + (l3 + l7)). With one 8-lane mul_add chain per output over K in column order, a
// dot product gives exactly the reference's bits.
static inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_hadd_ps(s, s);  // [s0 + s1, s2 + s3, ...]
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

// The tree sums (hsum) of eight vectors at once, in order: lane i of the result is hsum(v[i]),
// with the same additions in the same order (each vector's halves added, then two rounds of
// pairwise adds), so per-block reductions of several outputs cost one pass.
static inline __m256 hsum8(const __m256 v[8]) {
  __m256 a[4];
  for (int i = 0; i < 4; ++i)
    a[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  const __m256 b0 = _mm256_hadd_ps(a[0], a[1]), b1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 c = _mm256_hadd_ps(b0, b1);  // [r0 r2 r4 r6 | r1 r3 r5 r7]
  return _mm256_permutevar8x32_ps(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// bf16(x) kept as FP32: round to nearest even on the bits, NaN stays NaN (quiet), exactly as
// flashdesk::round_bf16.
static inline __m256 round_bf16(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb);
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256i rounded = _mm256_and_si256(_mm256_add_epi32(u, bias), hi);
  const __m256i nan_bits = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), hi);
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                            _mm256_set1_epi32(0x7F800000));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(rounded, nan_bits, is_nan));
}

// Loads n < 8 floats, the other lanes zero.
static inline __m256 load_partial(const float* p, int64_t n) {
  float tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(tmp, p, static_cast<size_t>(n) * sizeof(float));
  return _mm256_loadu_ps(tmp);
}

static inline void store_partial(float* p, __m256 v, int64_t n) {
  float tmp[8];
  _mm256_storeu_ps(tmp, v);
  std::memcpy(p, tmp, static_cast<size_t>(n) * sizeof(float));
}

// FP8 E4M3 codes (8, in the low half) to FP16 by a bit shift: sign-extend, shift the exponent and
// mantissa into place, clear the copy of the sign. The FP16 value is the E4M3 value times 2^-8
// (bias 15 against 7), exact for every code including subnormals; the NaN code 0x7F decodes to
// 480 / 256 instead of NaN (weights never hold it).
static inline __m128i e4m3_to_f16_bits(__m128i codes) {
  const __m128i h = _mm_slli_epi16(_mm_cvtepi8_epi16(codes), 7);
  return _mm_and_si128(h, _mm_set1_epi16(static_cast<short>(0xBFFF)));
}

// 8 E4M3 codes times 2^-8, as FP32.
static inline __m256 e4m3x8_div256(const uint8_t* codes) {
  return _mm256_cvtph_ps(
      e4m3_to_f16_bits(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes))));
}

// 16 E4M3 codes times 2^-8 as two FP32 vectors.
static inline void e4m3x16_div256(const uint8_t* codes, __m256& lo, __m256& hi) {
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(c), 7),
                                     _mm256_set1_epi16(static_cast<short>(0xBFFF)));
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

// E2M1 code -> twice its value as int8 (0, 1, 2, 3, 4, 6, 8, 12 and negatives): a 16-entry table
// for pshufb. -0 decodes to +0, which changes no sum.
static inline __m128i e2m1_twice_table() {
  return _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
}

// 16 packed bytes (32 E2M1 codes, low nibble = even element) to 32 int8 values (twice the E2M1
// value) in element order: e0 = elements 0..15, e1 = 16..31.
static inline void e2m1x32_twice(const uint8_t* packed, __m128i& e0, __m128i& e1) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(b, nib);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), nib);
  const __m128i t = e2m1_twice_table();
  const __m128i vl = _mm_shuffle_epi8(t, lo), vh = _mm_shuffle_epi8(t, hi);
  e0 = _mm_unpacklo_epi8(vl, vh);
  e1 = _mm_unpackhi_epi8(vl, vh);
}

// The low 8 int8 lanes of v as FP32 times `scale`.
static inline __m256 i8x8_scaled(__m128i v, __m256 scale) {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), scale);
}

// 32 E2M1 values of one block times `half_scale` (= the block scale / 2) as 4 FP32 vectors.
static inline void e2m1x32(const uint8_t* packed, __m256 half_scale, __m256 out[4]) {
  __m128i e0, e1;
  e2m1x32_twice(packed, e0, e1);
  out[0] = i8x8_scaled(e0, half_scale);
  out[1] = i8x8_scaled(_mm_srli_si128(e0, 8), half_scale);
  out[2] = i8x8_scaled(e1, half_scale);
  out[3] = i8x8_scaled(_mm_srli_si128(e1, 8), half_scale);
}

// 8 BF16 values (raw bits) as FP32.
static inline __m256 bf16x8(const uint8_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// E8M0 code -> 2^(code - 127) as FP32 (code 0 -> 2^-127, a subnormal).
static inline float e8m0(uint8_t code) {
  const uint32_t bits = code != 0 ? uint32_t{code} << 23 : 0x00400000u;  // branch-free
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace flashdesk::cpu_opt::avx2
