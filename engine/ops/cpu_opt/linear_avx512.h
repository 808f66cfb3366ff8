// AVX-512 linear kernel (linear_avx512.cpp), gathered into the table by kernels_avx512.cpp.
#pragma once

#include <cstdint>

#include "engine/ops/cpu_opt/opt_kernels.h"

namespace flashdesk::cpu_opt::avx512 {

// FP4 weights with one or two tokens on the AVX-512 GEMV; everything else on avx2::linear_rows.
void linear_rows(const LinearJob& job, int64_t o_begin, int64_t o_end);

}  // namespace flashdesk::cpu_opt::avx512
