// The dense matrix products of the CUDA backend's prefill paths, on cuBLAS. cuBLAS is loaded with
// dlopen on the first product, not linked: its 500+ MB of libraries would add over half a second
// to the start of every process that links the engine, GPU or not. The `cuda-emu` preset replaces
// this with a plain loop (emu/blas_emu.cpp).
#pragma once

#include <cstdint>

#include "engine/ops/cuda/cuda_runtime_compat.h"
#include "engine/ops/cuda/no_padding.h"

namespace flashdesk::cuda {

enum class GemmInput : uint8_t { Bf16, F32 };
enum class GemmOutput : uint8_t { F32, Bf16 };

// Row-major operands: Y [rows, cols] (leading dimension ldy) = X [rows, k] . W [cols, k]^T, both
// operands of type `in` (BF16 as uint16 bits, or F32), FP32 accumulation (no TF32); Y F32, or
// (out Bf16) the FP32 sums rounded to BF16 (nearest even) as uint16 bits.
// batch > 1: product b reads X + b*stride_x, W + b*stride_w and writes Y + b*stride_y (elements).
FD_NO_PADDING_BEGIN
struct GemmArgs {
  GemmInput in = GemmInput::Bf16;
  GemmOutput out = GemmOutput::F32;
  uint8_t padding[6] = {};
  int64_t rows = 0, cols = 0, k = 0;
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  int64_t ldw = 0;
  void* y = nullptr;
  int64_t ldy = 0;
  int64_t batch = 1, stride_x = 0, stride_w = 0, stride_y = 0;
};
FD_NO_PADDING_END

class Blas {
 public:
  Blas(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Offered to the step open on the stream first (step_ops.h; blas_calls.cpp).
  void gemm_nt(const GemmArgs& a);
  // The stream the products go to from now on (the context's current one).
  void use_stream(cudaStream_t stream);

 private:
  void ensure_handle();
  // The product issued to the current stream (blas.cpp; blas_emu.cpp in the emulation).
  void issue_gemm(const GemmArgs& a);

  int device_;
  cudaStream_t stream_;
  void* handle_ = nullptr;  // cublasHandle_t
};

}  // namespace flashdesk::cuda
