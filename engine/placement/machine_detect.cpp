// Reading this machine for the planner (machine_detect.h).
#include "engine/placement/machine_detect.h"

#include <cstdio>
#include <cstring>

#include "engine/ops/cuda/cuda_devices.h"

namespace flashdesk {

uint64_t available_host_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char key[64];
  unsigned long long kib = 0, found = 0;
  while (std::fscanf(f, "%63s %llu kB", key, &kib) == 2)
    if (std::strcmp(key, "MemAvailable:") == 0) {
      found = kib;
      break;
    }
  std::fclose(f);
  return static_cast<uint64_t>(found) * 1024;
}

MachineSpec detect_machine() {
  MachineSpec m;
  for (const CudaDeviceInfo& d : cuda_devices()) m.gpu_bytes.push_back(d.free_bytes);
  m.host_bytes = available_host_bytes();
  return m;
}

}  // namespace flashdesk
