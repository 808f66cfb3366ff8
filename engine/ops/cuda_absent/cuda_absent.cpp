// cuda_devices.h for builds without the CUDA backend (no nvcc at configure time, or
// FLASHDESK_CUDA=OFF): no GPUs, and a reason that says so.
#include "engine/ops/cuda/cuda_devices.h"

#include "engine/ops/vision_ops.h"
#include "engine/util/error.h"

namespace flashdesk {

std::vector<CudaDeviceInfo> cuda_devices() {
  return {};
}

std::string cuda_unavailable_reason() {
  return "this build of FlashDesk has no CUDA backend (it was configured without nvcc or with "
         "FLASHDESK_CUDA=OFF)";
}

std::string describe(const CudaDeviceInfo& d) {
  return d.name;
}

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw InvalidRequest(cuda_unavailable_reason());
}

std::vector<std::unique_ptr<Collective>> make_nccl_collectives(const std::vector<Backend*>&) {
  throw InvalidRequest(cuda_unavailable_reason());
}

std::unique_ptr<VisionOps> make_cuda_vision_ops(Backend&) {
  return nullptr;  // no CUDA backend can exist in this build
}

}  // namespace flashdesk
