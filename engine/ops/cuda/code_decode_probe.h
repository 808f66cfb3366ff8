// The device's fast code decoders (e4m3_exact, e2m1_exact in device_numeric.cuh; the BF16 pair
// decoders of bf16_codes.cuh) run over every code on the device, so a test can hold them bit for
// bit to the host's decoders.
#pragma once

#include <cstdint>
#include <vector>

namespace flashdesk {
class CudaBackend;

// 256 E4M3 values (codes 0..255) then 16 E2M1 values (codes 0..15), decoded on the device.
std::vector<float> decode_every_code(CudaBackend& be);

// BF16 bits from the key decoders of the prefill attention (bf16_codes.cuh): first every E4M3
// code c times 2^(s - 127) for each UE8M0 code s in `scale_codes`, at [si * 256 + c]; then every
// E2M1 code c times every E4M3 scale code e, at [scale_codes.size() * 256 + e * 16 + c].
std::vector<uint16_t> decode_key_codes_bf16(CudaBackend& be,
                                            const std::vector<uint8_t>& scale_codes);

}  // namespace flashdesk
