// What the CUDA runtime says about this machine's GPUs, and the maker of the CUDA backend, in plain
// C++ (no CUDA types): the backend factory, the CLI and the app include this whether or not the
// CUDA backend was built (engine/ops/cuda_absent/ implements it for builds without nvcc).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops/backend.h"
#include "engine/ops/collective.h"

namespace flashdesk {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;          // "NVIDIA H200"
  size_t total_bytes = 0;    // device memory
  size_t free_bytes = 0;     // free when asked
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
};

// The GPUs this process can use; empty when CUDA was not built, there is no driver or no GPU.
std::vector<CudaDeviceInfo> cuda_devices();
// Why cuda_devices() is empty, for the user ("no NVIDIA driver was found (...)"); "" when it is
// not.
std::string cuda_unavailable_reason();
// "NVIDIA H200, 140.4 GiB, compute 9.0".
std::string describe(const CudaDeviceInfo& d);
// The CUDA backend on GPU `device` (an index of cuda_devices()). Throws InvalidRequest naming the
// reason when there is no such GPU.
std::unique_ptr<Backend> make_cuda_backend(int device);
// NCCL all-reduces between CUDA backends of this process, one rank a backend, each on its own GPU
// (engine/ops/cuda/nccl_collective.cpp): collective r belongs to backends[r] and runs on its
// stream. Throws InvalidRequest for a backend that is not a CUDA one or a GPU given twice, and
// CudaError when NCCL cannot be loaded or set up.
std::vector<std::unique_ptr<Collective>> make_nccl_collectives(
    const std::vector<Backend*>& backends);

}  // namespace flashdesk
