// Block quantisation with the reference's rules (docs/model-spec.md §3.8): the scalar reference
// used for activations, caches and the checkpoint writer. Optimised kernels are tested against
// these.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashdesk {

// FP8 E4M3 codes with one power-of-two (UE8M0) scale per block: amax floored at 1e-4,
// scale = 2^ceil(log2(amax * fp32(1/448))), code = e4m3(clamp(x/scale, ±448)). Returns the scale's
// code.
uint8_t quantize_block_fp8(const float* x, size_t n, uint8_t* codes);
void dequantize_block_fp8(const uint8_t* codes, size_t n, uint8_t scale_code, float* out);

// FP4 E2M1 packed in pairs (low nibble = even element) with a UE8M0 scale per block (block 32:
// indexer keys and queries, expert weights): amax floored at 6*2^-126, scale = 2^ceil(log2(amax *
// fp32(1/6))). n must be even; `packed` receives n/2 bytes. Returns the scale's code.
uint8_t quantize_block_fp4_e8m0(const float* x, size_t n, uint8_t* packed);

// FP4 E2M1 packed in pairs with an E4M3 scale per block (block 16: compressed main KV): amax
// floored at 6*2^-9, scale = e4m3(amax/6) (not a power of two). Returns the scale's E4M3 code.
uint8_t quantize_block_fp4_e4m3(const float* x, size_t n, uint8_t* packed);

// Unpacks n FP4 values and multiplies them by `scale` (already decoded from E8M0 or E4M3).
void dequantize_block_fp4(const uint8_t* packed, size_t n, float scale, float* out);

// In-place quantise-then-dequantise of consecutive blocks: what the reference's fake-quant does.
void fake_quant_fp8(float* x, size_t n, size_t block);
void fake_quant_fp4_e8m0(float* x, size_t n, size_t block);
void fake_quant_fp4_e4m3(float* x, size_t n, size_t block);

}  // namespace flashdesk
