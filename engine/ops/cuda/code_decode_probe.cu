// Every FP8 and FP4 code through the device's fast decoders (code_decode_probe.h).
#include "engine/ops/cuda/code_decode_probe.h"

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace flashdesk {
namespace cuda {
namespace {

__global__ void decode_every_code_kernel(float* out) {
  FD_GRID_PROLOGUE();
  const unsigned i = threadIdx.x;  // 272 threads
  out[i] = i < 256 ? e4m3_exact(i) : e2m1_exact(i - 256);
}

}  // namespace
}  // namespace cuda

std::vector<float> decode_every_code(CudaBackend& be) {
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  Tensor out = ctx.scratch(DType::F32, Shape{256 + 16});
  FD_LAUNCH(cuda::decode_every_code_kernel, dim3(1), dim3(256 + 16), 0, ctx.stream(),
            cuda::ptr<float>(out));
  std::vector<float> host(256 + 16);
  be.read(out, host.data(), out.nbytes());
  return host;
}

}  // namespace flashdesk
