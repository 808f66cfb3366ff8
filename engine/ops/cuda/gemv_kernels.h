// Which kernels run the dense FP8 GEMVs (linear.cu): the tensor cores (gemv_tc.cuh) where they
// fit, the CUDA cores, or by row count (Auto, the default). Shared by the backend's switch and the
// device context the linear paths read it from. Likewise where the CUDA-core FP8 GEMV decodes its
// codes by the hardware's E4M3 conversion (gemv_device.cuh e4m3x4_values, sm_89 on) rather than
// by shifts and masks: nowhere, at one act_quant'ed row, or at every row count and for
// unquantised inputs too (the default: faster or level at every shape measured on the GPU).
#pragma once

namespace flashdesk::cuda {

enum class GemvKernels { Auto, TensorCores, CudaCores };
enum class Fp8Conversion { Off, OneRow, All };

}  // namespace flashdesk::cuda
