// AVX2 kernels of the linear layers (linear_avx2.cpp), gathered into the table by
// kernels_avx2.cpp.
#pragma once

#include <cstdint>

#include "engine/ops/cpu_opt/opt_kernels.h"

namespace flashdesk::cpu_opt::avx2 {

void act_quant_row(const float* x, int64_t k, float* out);
void linear_rows(const LinearJob& job, int64_t o_begin, int64_t o_end);

}  // namespace flashdesk::cpu_opt::avx2
