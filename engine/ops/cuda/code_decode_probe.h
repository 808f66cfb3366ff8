// The device's fast code decoders (e4m3_exact, e2m1_exact in device_numeric.cuh) run over every
// code on the device, so a test can hold them bit for bit to the host's decoders.
#pragma once

#include <vector>

namespace flashdesk {
class CudaBackend;

// 256 E4M3 values (codes 0..255) then 16 E2M1 values (codes 0..15), decoded on the device.
std::vector<float> decode_every_code(CudaBackend& be);

}  // namespace flashdesk
