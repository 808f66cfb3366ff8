// Which kernels run the dense FP8 GEMVs (linear.cu): the tensor cores (gemv_tc.cuh) where they
// fit, the CUDA cores, or by row count (Auto, the default). Shared by the backend's switch and the
// device context the linear paths read it from.
#pragma once

namespace flashdesk::cuda {

enum class GemvKernels { Auto, TensorCores, CudaCores };

}  // namespace flashdesk::cuda
