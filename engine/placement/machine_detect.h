// This machine as the placement planner sees it (placement_plan.h): its GPUs' free memory and
// the host memory available now. Shared by `inspect --plan --devices auto` and the app.
#pragma once

#include <cstdint>

#include "engine/placement/placement_plan.h"

namespace flashdesk {

// MemAvailable of /proc/meminfo in bytes; 0 where it cannot be read.
uint64_t available_host_bytes();

// The CUDA devices' free memory (none in a build without CUDA or on a machine without a GPU),
// available host memory, and the planner's default reserve and bandwidths.
MachineSpec detect_machine();

}  // namespace flashdesk
