// The one-row FP8 GEMV with its weight rows brought into shared memory by bulk copies
// (gemv_bulk.cu): each warp streams its own contiguous rows through a ring of pieces that one lane
// keeps in flight, so the bytes in flight do not wait on the warp's products (the register-load
// GEMV's loads are in flight only between them). Hopper on (bulk_copy.cuh); elsewhere, and for
// shapes it does not take, gemv_bulk_fits is false and linear.cu's kernels run.
#pragma once

#include "engine/ops/cuda/linear.cuh"

namespace flashdesk::cuda {

// Whether gemv_bulk takes the job on this device: FP8 block weights, one activation row, rows of
// a multiple of 16 bytes from a 16-byte aligned start, the staged row and the ring within the
// device's shared memory.
bool gemv_bulk_fits(const DeviceContext& ctx, const GemvJob& job);
void gemv_bulk(DeviceContext& ctx, const GemvJob& job);

}  // namespace flashdesk::cuda
