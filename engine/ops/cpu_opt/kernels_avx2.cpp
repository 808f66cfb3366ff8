// AVX2 kernels of the optimised CPU backend other than the linear layers (linear_avx2.cpp):
// reductions, the elementwise ops with the reference's exact rounding, cache-row decoding, and
// the AVX2 kernel table.
#include <algorithm>
#include <cmath>

#include "engine/ops/cpu_opt/attention_avx2.h"
#include "engine/ops/cpu_opt/linear_avx2.h"
#include "engine/ops/cpu_opt/simd_avx2.h"
#include "engine/util/numeric.h"
#include "engine/util/quant.h"

namespace flashdesk::cpu_opt {
namespace avx2 {
namespace {

// cpu::dot's order: lane j sums the elements j, j + 8, ... (the tail element i in lane i % 8).
float dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = mul_add(acc, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
  if (i < n) acc = mul_add(acc, load_partial(a + i, n - i), load_partial(b + i, n - i));
  return hsum(acc);
}

// Applies f (vector -> vector, same function for the tail) to n floats from src into dst.
template <class F>
void map(const float* src, float* dst, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, f(_mm256_loadu_ps(src + i), i));
  if (i < n) store_partial(dst + i, f(load_partial(src + i, n - i), i), n - i);
}

void round_bf16_n(float* x, int64_t n) {
  map(x, x, n, [](__m256 v, int64_t) { return round_bf16(v); });
}

void divide_round_bf16(const float* x, float d, int64_t n, float* out) {
  const __m256 dv = _mm256_set1_ps(d);
  map(x, out, n, [&](__m256 v, int64_t) { return round_bf16(_mm256_div_ps(v, dv)); });
}

void rms_norm_row(const float* x, const float* w, float eps, int64_t d, float* y) {
  const __m256 r = _mm256_set1_ps(1.0f / std::sqrt(dot(x, x, d) / static_cast<float>(d) + eps));
  map(x, y, d, [&](__m256 v, int64_t i) {
    const __m256 xr = _mm256_mul_ps(v, r);
    if (!w) return round_bf16(xr);
    const __m256 wv = i + 8 <= d ? _mm256_loadu_ps(w + i) : load_partial(w + i, d - i);
    return round_bf16(_mm256_mul_ps(wv, xr));
  });
}

// [c0, c0, c1, c1, c2, c2, c3, c3] from 4 consecutive floats.
__m256 duplicate_pairs(const float* p) {
  const __m128 c = _mm_loadu_ps(p);
  return _mm256_set_m128(_mm_unpackhi_ps(c, c), _mm_unpacklo_ps(c, c));
}

void rope_pairs(float* v, const float* cos, const float* sin, int64_t pairs) {
  int64_t p = 0;
  for (; p + 4 <= pairs; p += 4) {
    const __m256 x = _mm256_loadu_ps(v + 2 * p);
    const __m256 t1 = _mm256_mul_ps(x, duplicate_pairs(cos + p));  // a*c, b*c
    const __m256 t2 =
        _mm256_mul_ps(_mm256_permute_ps(x, 0xB1), duplicate_pairs(sin + p));  // b*s, a*s
    _mm256_storeu_ps(v + 2 * p, round_bf16(_mm256_addsub_ps(t1, t2)));  // a*c - b*s, b*c + a*s
  }
  for (; p < pairs; ++p) {
    const float a = v[2 * p], b = v[2 * p + 1];
    v[2 * p] = flashdesk::round_bf16(a * cos[p] - b * sin[p]);
    v[2 * p + 1] = flashdesk::round_bf16(a * sin[p] + b * cos[p]);
  }
}

__m256 load_n(const float* p, int64_t i, int64_t n) {
  return i + 8 <= n ? _mm256_loadu_ps(p + i) : load_partial(p + i, n - i);
}

void hc_collapse_row(const float* x, const float* pre, int64_t hc, int64_t d, float* u) {
  map(x, u, d, [&](__m256, int64_t e) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < hc; ++j)
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(pre[j]), load_n(x + j * d, e, d)));
    return round_bf16(acc);
  });
}

void hc_expand_row(const float* x, const float* y, const float* post, const float* comb, int64_t hc,
                   int64_t d, float* out) {
  for (int64_t k = 0; k < hc; ++k)
    map(y, out + k * d, d, [&](__m256 yv, int64_t e) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t j = 0; j < hc; ++j)
        acc = _mm256_add_ps(
            acc, _mm256_mul_ps(_mm256_set1_ps(comb[j * hc + k]), load_n(x + j * d, e, d)));
      return round_bf16(_mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(post[k]), yv), acc));
    });
}

void dequantize_kv_row(KvFormat f, const uint8_t* row, int64_t dim, float* out) {
  const uint8_t* scales = row + kv_code_bytes(f, dim);
  int64_t c = 0;
  for (; c + 32 <= dim; c += 32) {
    __m256 v[4] = {};
    switch (f) {
      case KvFormat::Fp8Window: {
        const __m256 s = _mm256_set1_ps(e8m0(scales[c / 32]) * 256.0f);
        e4m3x16_div256(row + c, v[0], v[1]);
        e4m3x16_div256(row + c + 16, v[2], v[3]);
        for (auto& x : v) x = _mm256_mul_ps(x, s);
        break;
      }
      case KvFormat::Fp4Key:
        e2m1x32(row + c / 2, _mm256_set1_ps(e8m0(scales[c / 32]) * 0.5f), v);
        break;
      case KvFormat::Fp4Entry: {  // one E4M3 scale per 16: halves of the 32 differ
        __m128i e0, e1;
        e2m1x32_twice(row + c / 2, e0, e1);
        const __m256 s0 = _mm256_set1_ps(e4m3_to_f32(scales[c / 16]) * 0.5f);
        const __m256 s1 = _mm256_set1_ps(e4m3_to_f32(scales[c / 16 + 1]) * 0.5f);
        v[0] = i8x8_scaled(e0, s0);
        v[1] = i8x8_scaled(_mm_srli_si128(e0, 8), s0);
        v[2] = i8x8_scaled(e1, s1);
        v[3] = i8x8_scaled(_mm_srli_si128(e1, 8), s1);
        break;
      }
    }
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + c + 8 * i, v[i]);
  }
  if (c < dim) {  // a trailing half block of 16 (Fp4Entry only): the scalar decoder
    const int64_t block = kv_block(f);
    for (; c < dim; c += block)
      dequantize_block_fp4(row + c / 2, static_cast<size_t>(block), e4m3_to_f32(scales[c / block]),
                           out + c);
  }
}

void relu_weighted_sum(const float* dots, int64_t stride, const float* w, int64_t heads, int64_t m,
                       float* score) {
  map(dots, score, m, [&](__m256, int64_t s) {
    __m256 acc = _mm256_setzero_ps();
    // The official BF16 score: per head bf16(relu(bf16(dot)) * w), summed in FP32, rounded.
    for (int64_t h = 0; h < heads; ++h) {
      const __m256 r =
          _mm256_max_ps(round_bf16(load_n(dots + h * stride, s, m)), _mm256_setzero_ps());
      acc = _mm256_add_ps(acc, round_bf16(_mm256_mul_ps(r, _mm256_set1_ps(w[h]))));
    }
    return round_bf16(acc);
  });
}

}  // namespace
}  // namespace avx2

const Kernels* avx2_kernels() {
  static const Kernels k{CpuIsa::Avx2,
                         avx2::act_quant_row,
                         avx2::linear_rows,
                         avx2::dot,
                         avx2::round_bf16_n,
                         avx2::divide_round_bf16,
                         avx2::rms_norm_row,
                         avx2::rope_pairs,
                         avx2::hc_collapse_row,
                         avx2::hc_expand_row,
                         avx2::qk_logits,
                         avx2::pv_accumulate,
                         avx2::dequantize_kv_row,
                         avx2::relu_weighted_sum};
  return &k;
}

}  // namespace flashdesk::cpu_opt
