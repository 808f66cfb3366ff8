// The per-device state of a CUDA backend.
#include "engine/ops/cuda/device_context.h"

#include <atomic>
#include <cstring>

namespace flashdesk::cuda {
namespace {

std::atomic<uint64_t> g_kernels{0};

// Freed activations kept for reuse: a quarter of the device memory, at most 8 GiB.
size_t cache_limit(const cudaDeviceProp& p) {
  return std::min<size_t>(p.totalGlobalMem / 4, size_t{8} << 30);
}

cudaDeviceProp properties(int device) {
  cudaDeviceProp p{};
  FD_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p;
}

// Selects the device before the stream is created (members initialise in declaration order).
int select(int device) {
  FD_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

}  // namespace

uint64_t kernels_launched() {
  return g_kernels.load(std::memory_order_relaxed);
}

void count_kernel_launch() {
  g_kernels.fetch_add(1, std::memory_order_relaxed);
}

DeviceContext::DeviceContext(int device)
    : device_(select(device)),
      props_(properties(device)),
      stream_(),
      pool_(std::make_shared<DevicePool>(device, cache_limit(props_))),
      weights_(pool_),
      blas_(device, stream_.get()) {}

Tensor DeviceContext::scratch(DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(pool_->allocate(bytes), 0, dtype, shape);
}

Tensor DeviceContext::upload_host(DType dtype, Shape shape, const void* data) {
  Tensor t = scratch(dtype, shape);
  if (t.nbytes() > 0)
    FD_CUDA_CHECK(cudaMemcpyAsync(t.bytes(), data, t.nbytes(), cudaMemcpyHostToDevice, stream()));
  return t;
}

}  // namespace flashdesk::cuda

namespace flashdesk::cuda {

Tensor DeviceContext::upload_cached(const void* key, const void* data, size_t bytes) {
  Cached& c = cached_[key];
  const auto* b = static_cast<const uint8_t*>(data);
  if (c.tensor.defined() && c.bytes.size() == bytes &&
      (bytes == 0 || std::memcmp(c.bytes.data(), b, bytes) == 0))
    return c.tensor;
  c.bytes.assign(b, b + bytes);
  c.tensor = upload_host(DType::U8, Shape{static_cast<int64_t>(bytes)}, data);
  return c.tensor;
}

}  // namespace flashdesk::cuda
