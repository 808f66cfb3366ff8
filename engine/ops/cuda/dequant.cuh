// A quantised weight as a BF16 matrix for the tensor-core GEMM of the prefill path (linear.cuh):
// every stored value is a BF16 value (an FP8 / FP4 code times a power of two), so this is exact.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/weights.h"

namespace flashdesk::cuda {

// out [rows, k] BF16 bits of w (Fp8Block or Fp4Row) on ctx's stream. Eight values a thread (one
// 16-byte store) when k is a multiple of 8, one a thread otherwise.
void dequantize_to_bf16(DeviceContext& ctx, const LinearWeight& w, int64_t rows, int64_t k,
                        uint16_t* out);

}  // namespace flashdesk::cuda
