// AVX2 kernels of sparse attention: the logits (heads x keys dot products) and the weighted sum
// of keys, both register-blocked over several heads and keys / columns so that each loaded
// vector feeds several multiply-adds. Every output keeps one chain in the reference's order (the
// logits: cpu::dot over the head dim; the sums: over keys in list order), whatever the blocking.
#include "engine/ops/cpu_opt/attention_avx2.h"

#include "engine/ops/cpu_opt/simd_avx2.h"

namespace flashdesk::cpu_opt::avx2 {
namespace {

// Columns [e, e + 8) of a row, zero past d.
inline __m256 load8(const float* row, int64_t e, int64_t d) {
  return e + 8 <= d ? _mm256_loadu_ps(row + e) : load_partial(row + e, d - e);
}

// HR heads x KR keys of logits.
template <int HR, int KR>
void logits_tile(const float* q, const float* const* keys, int64_t nk, int64_t d, float scale,
                 float* logits) {
  __m256 acc[HR][KR];
#pragma GCC unroll 4
  for (int h = 0; h < HR; ++h)
#pragma GCC unroll 4
    for (int k = 0; k < KR; ++k) acc[h][k] = _mm256_setzero_ps();
  for (int64_t e = 0; e < d; e += 8) {
    __m256 kv[KR];
#pragma GCC unroll 4
    for (int k = 0; k < KR; ++k) kv[k] = load8(keys[k], e, d);
#pragma GCC unroll 4
    for (int h = 0; h < HR; ++h) {
      const __m256 qv = load8(q + h * d, e, d);
#pragma GCC unroll 4
      for (int k = 0; k < KR; ++k) acc[h][k] = mul_add(acc[h][k], qv, kv[k]);
    }
  }
  for (int h = 0; h < HR; ++h)
    for (int k = 0; k < KR; ++k) logits[h * nk + k] = hsum(acc[h][k]) * scale;
}

template <int HR>
void logits_heads(const float* q, const float* const* keys, int64_t nk, int64_t d, float scale,
                  float* logits) {
  int64_t i = 0;
  for (; i + 3 <= nk; i += 3) logits_tile<HR, 3>(q, keys + i, nk, d, scale, logits + i);
  for (; i < nk; ++i) logits_tile<HR, 1>(q, keys + i, nk, d, scale, logits + i);
}

// HR heads x ER vectors of columns [e0, e0 + 8 ER) of acc, summed over every key in order.
template <int HR, int ER>
void pv_tile(const float* p, int64_t nk, const float* const* keys, int64_t d, int64_t e0,
             float* acc) {
  __m256 a[HR][ER];
#pragma GCC unroll 4
  for (int h = 0; h < HR; ++h)
#pragma GCC unroll 4
    for (int v = 0; v < ER; ++v) a[h][v] = load8(acc + h * d, e0 + 8 * v, d);
  for (int64_t i = 0; i < nk; ++i) {
    __m256 kv[ER];
#pragma GCC unroll 4
    for (int v = 0; v < ER; ++v) kv[v] = load8(keys[i], e0 + 8 * v, d);
#pragma GCC unroll 4
    for (int h = 0; h < HR; ++h) {
      const __m256 pv = _mm256_set1_ps(p[h * nk + i]);
#pragma GCC unroll 4
      for (int v = 0; v < ER; ++v) a[h][v] = mul_add(a[h][v], pv, kv[v]);
    }
  }
  for (int h = 0; h < HR; ++h)
    for (int v = 0; v < ER; ++v) {
      const int64_t e = e0 + 8 * v;
      if (e + 8 <= d)
        _mm256_storeu_ps(acc + h * d + e, a[h][v]);
      else if (e < d)
        store_partial(acc + h * d + e, a[h][v], d - e);
    }
}

template <int HR>
void pv_heads(const float* p, int64_t nk, const float* const* keys, int64_t d, float* acc) {
  int64_t e = 0;
  for (; e + 24 <= d; e += 24) pv_tile<HR, 3>(p, nk, keys, d, e, acc);
  for (; e < d; e += 8) pv_tile<HR, 1>(p, nk, keys, d, e, acc);
}

}  // namespace

void qk_logits(const float* q, int64_t heads, const float* const* keys, int64_t nk, int64_t d,
               float scale, float* logits) {
  int64_t h = 0;
  for (; h + 4 <= heads; h += 4) logits_heads<4>(q + h * d, keys, nk, d, scale, logits + h * nk);
  for (; h < heads; ++h) logits_heads<1>(q + h * d, keys, nk, d, scale, logits + h * nk);
}

void pv_accumulate(const float* p, int64_t heads, const float* const* keys, int64_t nk, int64_t d,
                   float* acc) {
  int64_t h = 0;
  for (; h + 4 <= heads; h += 4) pv_heads<4>(p + h * nk, nk, keys, d, acc + h * d);
  for (; h < heads; ++h) pv_heads<1>(p + h * nk, nk, keys, d, acc + h * d);
}

}  // namespace flashdesk::cpu_opt::avx2
