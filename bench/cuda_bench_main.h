// What the CUDA benches' mains share around their measurements: without a device they say so and
// exit 0 (nothing measured; CI builds the benches on machines without a GPU), and an exception
// (out of memory, a CUDA error) is printed with the bench's name and exits 1.
#pragma once

#include <cstdio>
#include <exception>

#include "engine/ops/cuda/cuda_devices.h"

namespace flashdesk::bench {

// measure() -> exit status, run where a CUDA device is present.
template <class Measure>
int run_on_gpu(const char* name, Measure&& measure) {
  if (cuda_devices().empty()) {
    std::printf("%s: no CUDA device (%s); nothing measured\n", name,
                cuda_unavailable_reason().c_str());
    return 0;
  }
  try {
    return measure();
  } catch (const std::exception& e) {  // out of memory, a CUDA error: say which
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace flashdesk::bench
