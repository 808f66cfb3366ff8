// `flashdesk-cli version`: what was built and which GPUs it sees, so bug reports say which engine
// produced a result.
#include <cstdio>

#include "engine/ops/cuda/cuda_devices.h"

namespace flashdesk::cli {

int run_version(int, char**) {
  std::printf("flashdesk %s\n", FLASHDESK_VERSION);
#ifdef FLASHDESK_HAVE_CUDA
  std::printf("cuda backend: built\n");
#else
  std::printf("cuda backend: not built\n");
#endif
  const std::vector<CudaDeviceInfo> gpus = cuda_devices();
  for (const CudaDeviceInfo& g : gpus) std::printf("cuda:%d %s\n", g.index, describe(g).c_str());
  if (gpus.empty()) std::printf("gpus: none (%s)\n", cuda_unavailable_reason().c_str());
  return 0;
}

}  // namespace flashdesk::cli
