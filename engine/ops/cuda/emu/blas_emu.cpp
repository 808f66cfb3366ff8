// blas.h for the CPU emulation: the same row-major NT products as plain FP32 loops.
#include <cstring>

#include "engine/ops/cuda/blas.h"
#include "engine/ops/cuda/emu/cuda_emu.h"
#include "engine/util/numeric.h"

namespace flashdesk::cuda {
namespace {

float load(GemmInput in, const void* base, int64_t i) {
  if (in == GemmInput::F32) return static_cast<const float*>(base)[i];
  uint32_t bits = static_cast<const uint16_t*>(base)[i];
  bits <<= 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void gemm_now(const GemmArgs& a) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t r = 0; r < a.rows; ++r)
      for (int64_t c = 0; c < a.cols; ++c) {
        float acc = 0.0f;
        for (int64_t i = 0; i < a.k; ++i)
          acc += load(a.in, a.x, b * a.stride_x + r * a.ldx + i) *
                 load(a.in, a.w, b * a.stride_w + c * a.ldw + i);
        const int64_t at = b * a.stride_y + r * a.ldy + c;
        if (a.out == GemmOutput::Bf16)
          static_cast<uint16_t*>(a.y)[at] = f32_to_bf16(acc);
        else
          static_cast<float*>(a.y)[at] = acc;
      }
}

}  // namespace

Blas::~Blas() = default;

void Blas::ensure_handle() {}

void Blas::use_stream(cudaStream_t stream) {
  stream_ = stream;
}

void Blas::issue_gemm(const GemmArgs& args) {
  fd_emu::issue([a = args] { gemm_now(a); });
}

}  // namespace flashdesk::cuda
