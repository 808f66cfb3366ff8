// AVX2 kernels of sparse attention (attention_avx2.cpp), gathered into the table by
// kernels_avx2.cpp.
#pragma once

#include <cstdint>

namespace flashdesk::cpu_opt::avx2 {

void qk_logits(const float* q, int64_t heads, const float* const* keys, int64_t nk, int64_t d,
               float scale, float* logits);
void pv_accumulate(const float* p, int64_t heads, const float* const* keys, int64_t nk, int64_t d,
                   float* acc);

}  // namespace flashdesk::cpu_opt::avx2
