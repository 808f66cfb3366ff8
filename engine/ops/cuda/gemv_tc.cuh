// FP8 linears of 1 to 8 rows on the tensor cores (gemv_tc.cu): the decode experts' form
// (moe_decode_tc.cu) with every activation row in a column of B, so 8 rows cost about what one
// does (the CUDA-core GEMV's FP32 products grow with the rows: wo_b 25 µs at one row, 97 at
// eight on the H200). Same numerics as the CUDA-core kernels: exact products, each 32-column
// block's sum scaled by its weight and activation scales, FP32 sums in another order (BF16
// linears: BF16 products of the codes' values and the inputs, each block's sum scaled by the
// weight's scale: the grouped wo_a at eight rows 42 µs against the CUDA cores' 72, H100).
#pragma once

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/linear.cuh"

namespace flashdesk::cuda {

// Whether gemv_tc takes the job: FP8 block weights, K a multiple of 64, 16-byte aligned weight
// rows; against act_quant'ed activations, one group and dense input rows; as a BF16 linear,
// grouped (wo_a: inputs used as BF16 values) in groups of whole 32-row scale tiles, input rows
// 16-byte aligned.
bool gemv_tc_fits(const GemvJob& job);

// The job (gemv's contract) on the tensor cores: the rows act_quant'ed once, then one launch (K
// split across blocks where the rows alone would leave the device idle; the last block of a row
// tile to finish sums the splits in order).
void gemv_tc(DeviceContext& ctx, const GemvJob& job);

}  // namespace flashdesk::cuda
