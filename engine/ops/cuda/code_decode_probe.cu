// Every FP8 and FP4 code through the device's fast decoders (code_decode_probe.h).
#include "engine/ops/cuda/code_decode_probe.h"

#include "engine/ops/cuda/bf16_codes.cuh"
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

// Block y < n_scales: E4M3 code threadIdx.x at UE8M0 scale scales[y] (the code in all four bytes,
// through the same dispatch as the attention's staging); block y = n_scales + e: E2M1 codes at
// E4M3 scale e (threads 0..15).
__global__ void decode_key_codes_kernel(const uint8_t* scales, int n_scales, uint16_t* out) {
  FD_GRID_PROLOGUE();
  const unsigned c = threadIdx.x, y = blockIdx.x;
  if (static_cast<int>(y) < n_scales) {
    const uint4 v = e4m3x8_to_bf16(c * 0x01010101u, c * 0x01010101u, scales[y]);
    out[y * 256 + c] = static_cast<uint16_t>(v.z >> 16);  // code 5 of the eight
  } else if (c < 16) {
    const uint32_t e = y - static_cast<unsigned>(n_scales);
    const uint4 v = e2m1x8_scaled_bf16(c * 0x11111111u, e4m3_bf16x2(e));
    out[static_cast<unsigned>(n_scales) * 256 + e * 16 + c] = static_cast<uint16_t>(v.w >> 16);
  }
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

namespace flashdesk {
std::vector<uint16_t> decode_key_codes_bf16(CudaBackend& be,
                                            const std::vector<uint8_t>& scale_codes) {
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  const int n = static_cast<int>(scale_codes.size());
  Tensor scales = ctx.upload_span(std::span<const uint8_t>(scale_codes), DType::U8);
  const size_t count = static_cast<size_t>(n) * 256 + 256 * 16;
  Tensor out = ctx.scratch(DType::BF16, Shape{static_cast<int64_t>(count)});
  FD_LAUNCH(cuda::decode_key_codes_kernel, dim3(static_cast<unsigned>(n + 256)), dim3(256), 0,
            ctx.stream(), cuda::ptr<const uint8_t>(scales), n, cuda::ptr<uint16_t>(out));
  std::vector<uint16_t> host(count);
  be.read(out, host.data(), out.nbytes());
  return host;
}
}  // namespace flashdesk
