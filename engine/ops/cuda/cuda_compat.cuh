// Kernel launches of the CUDA backend, in a form both nvcc and the CPU emulation of the `cuda-emu`
// preset (emu/cuda_emu.h) compile: FD_LAUNCH(kernel, grid, block, smem, stream, args...) is
// kernel<<<grid, block, smem, stream>>>(args...) followed by a check of the launch that names the
// kernel and the caller's file and line. Included by the kernel files (*.cu) only.
#pragma once

#include <cstddef>

#ifdef FLASHDESK_CUDA_EMU
#include "engine/ops/cuda/emu/cuda_emu.h"
#else
#include <cuda_runtime.h>
#endif

#include "engine/ops/cuda/cuda_check.h"

namespace flashdesk::cuda {
void count_kernel_launch();  // device_context.h
}

namespace flashdesk::cuda {

template <class... Params, class... Args>
void launch_kernel(const char* name, const char* file, int line, void (*kernel)(Params...),
                   dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
#ifdef FLASHDESK_CUDA_EMU
  (void)stream;
  fd_emu::launch(grid, block, smem, [&] { kernel(static_cast<Params>(args)...); });
#else
  // clang-format off
  kernel<<<grid, block, smem, stream>>>(static_cast<Params>(args)...);
  // clang-format on
#endif
  count_kernel_launch();
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    cuda_call_failed(static_cast<int>(e), cudaGetErrorName(e), cudaGetErrorString(e), name, file,
                     line);
}

}  // namespace flashdesk::cuda

#define FD_LAUNCH(kernel, grid, block, smem, stream, ...)                                          \
  ::flashdesk::cuda::launch_kernel(#kernel, __FILE__, __LINE__, kernel, grid, block, smem, stream, \
                                   __VA_ARGS__)

// Dynamic shared memory of the running kernel as `type* name` (16-byte aligned).
#ifdef FLASHDESK_CUDA_EMU
#define FD_DYNAMIC_SMEM(type, name) type* name = reinterpret_cast<type*>(::fd_emu::dynamic_smem())
#else
#define FD_DYNAMIC_SMEM(type, name)                                 \
  extern __shared__ __align__(16) unsigned char fd_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(fd_dynamic_smem_)
#endif
