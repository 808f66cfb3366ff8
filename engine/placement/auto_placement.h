// The placement planner's decision applied to a model loaded on one GPU (docs/placement.md): which
// layers' routed experts stay in host memory so the rest fits the device, decided before any
// weight is uploaded, and a clear refusal when not even the attention and dense parts fit.
#pragma once

#include <cstdint>
#include <string>

#include "engine/checkpoint/config.h"

namespace flashdesk {

struct ExpertPlacement {
  int64_t host_experts_from = -1;  // layers >= this keep their routed experts in host memory
  std::string summary;             // one line for the user; empty when everything is on the GPU
};

// For a GPU with `gpu_free` bytes free (of which `gpu_reserve` is kept for KV caches and
// scratch) and `host_bytes` of host memory. Throws InvalidRequest, with the sizes, when the
// embedding, head and every layer's dense part do not fit the GPU (the CPU would have to run
// whole layers, which a single-device model cannot do yet).
ExpertPlacement place_experts_for_one_gpu(const ModelConfig& config, uint64_t gpu_free,
                                          uint64_t host_bytes, uint64_t gpu_reserve = 8ull << 30);

}  // namespace flashdesk
