// Which kernels run the dense FP8 GEMVs (linear.cu): the tensor cores (gemv_tc.cuh) where they
// fit, the CUDA cores, or by row count (Auto, the default). Shared by the backend's switch and the
// device context the linear paths read it from. Likewise where the CUDA-core FP8 GEMV decodes its
// codes by the hardware's E4M3 conversion (gemv_device.cuh e4m3x4_values, sm_89 on) rather than
// by shifts and masks: nowhere, at one act_quant'ed row, or at every row count and for
// unquantised inputs too (the default: faster or level at every shape measured on the GPU). And
// the shape of the one-row FP8 GEMV on bulk copies (gemv_bulk.cuh).
#pragma once

namespace flashdesk::cuda {

enum class GemvKernels { Auto, TensorCores, CudaCores };
enum class Fp8Conversion { Off, OneRow, All };

// The bulk-copy GEMV's ring (gemv_bulk.cuh): slots a warp, columns a slot's row (a multiple of
// 512; at most 4096, 2048 at 4 rows), blocks a multiprocessor at most, and weight rows a slot (1,
// 2 or 4: the rows a warp multiplies together); the depth shrinks to what shared memory holds.
struct GemvBulkShape {
  int depth = 4;
  int piece = 4096;
  int blocks_per_sm = 2;
  int rows = 2;
  bool lane_copies = false;  // every lane's cp.async of its own chunks (ring at most 4 deep)
};

}  // namespace flashdesk::cuda
