// Device enumeration through the CUDA runtime, with the reason in words when there is no GPU.
#include "engine/ops/cuda/cuda_devices.h"

#include <cstdio>

#ifndef FLASHDESK_CUDA_EMU
#include <dlfcn.h>
#endif

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/cuda_runtime_compat.h"

namespace flashdesk {
namespace {

// cudaGetDeviceCount's error for this process, asked once (the answer does not change).
cudaError_t device_count(int& n) {
  static int count = 0;
  static const cudaError_t status = [] {
    const cudaError_t e = cudaGetDeviceCount(&count);
    cudaGetLastError();  // the failure must not stick to the next call
    return e;
  }();
  n = status == cudaSuccess ? count : 0;
  return status;
}

}  // namespace

std::vector<CudaDeviceInfo> cuda_devices() {
  int n = 0;
  if (device_count(n) != cudaSuccess) return {};
  std::vector<CudaDeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    CudaDeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.total_bytes = p.totalGlobalMem;
    d.major = p.major;
    d.minor = p.minor;
    d.multiprocessors = p.multiProcessorCount;
    int previous = 0;
    size_t free_b = 0, total_b = 0;
    if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(i) == cudaSuccess &&
        cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      d.free_bytes = free_b;
    cudaSetDevice(previous);
    out.push_back(d);
  }
  return out;
}

// Whether the driver library is installed at all (the runtime reports a missing driver and an
// old one with the same error).
bool driver_library_present() {
#ifdef FLASHDESK_CUDA_EMU
  return true;
#else
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != nullptr;
#endif
}

std::string cuda_unavailable_reason() {
  int n = 0;
  const cudaError_t e = device_count(n);
  if (e == cudaSuccess) return n > 0 ? "" : "the CUDA runtime reports no GPU";
  const std::string why =
      std::string(cudaGetErrorName(e)) + ": " + std::string(cudaGetErrorString(e));
  if (e == cudaErrorNoDevice) return "no NVIDIA GPU was found (" + why + ")";
  if (!driver_library_present())
    return "no NVIDIA driver is installed (libcuda.so.1 was not found; " + why + ")";
  return "the NVIDIA driver could not be used (" + why + ")";
}

std::string describe(const CudaDeviceInfo& d) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s, %.1f GiB, compute %d.%d", d.name.c_str(),
                static_cast<double>(d.total_bytes) / (1u << 30), d.major, d.minor);
  return buf;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return std::make_unique<CudaBackend>(device);
}

}  // namespace flashdesk
