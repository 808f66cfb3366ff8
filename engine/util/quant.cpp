// Scalar reference implementation of the block quantisers.
#include "engine/util/quant.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/util/error.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

float block_amax(const float* x, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

void pack_fp4(const float* x, size_t n, float scale, uint8_t* packed) {
  FD_CHECK(n % 2 == 0, "FP4 blocks hold an even number of values");
  for (size_t i = 0; i < n; i += 2) {
    const float a = std::clamp(x[i] / scale, -6.0f, 6.0f);
    const float b = std::clamp(x[i + 1] / scale, -6.0f, 6.0f);
    packed[i / 2] = e2m1_pack(f32_to_e2m1(a), f32_to_e2m1(b));
  }
}

}  // namespace

uint8_t quantize_block_fp8(const float* x, size_t n, uint8_t* codes) {
  // The reference multiplies by the FP32 reciprocal (not a division); it matters at the rare
  // amax values where the two round to opposite sides of a power of two.
  const float amax = std::max(block_amax(x, n), 1e-4f);
  const uint8_t scale_code = e8m0_ceil_code(amax * (1.0f / 448.0f));
  const float scale = e8m0_to_f32(scale_code);
  for (size_t i = 0; i < n; ++i) codes[i] = f32_to_e4m3(std::clamp(x[i] / scale, -448.0f, 448.0f));
  return scale_code;
}

void dequantize_block_fp8(const uint8_t* codes, size_t n, uint8_t scale_code, float* out) {
  const float scale = e8m0_to_f32(scale_code);
  for (size_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(codes[i]) * scale;
}

uint8_t quantize_block_fp4_e8m0(const float* x, size_t n, uint8_t* packed) {
  const float amax = std::max(block_amax(x, n), 6.0f * 0x1p-126f);
  const uint8_t scale_code = e8m0_ceil_code(amax * (1.0f / 6.0f));
  pack_fp4(x, n, e8m0_to_f32(scale_code), packed);
  return scale_code;
}

uint8_t quantize_block_fp4_e4m3(const float* x, size_t n, uint8_t* packed) {
  const float amax = std::max(block_amax(x, n), 6.0f * 0x1p-9f);
  const uint8_t scale_code = f32_to_e4m3(amax / 6.0f);
  pack_fp4(x, n, e4m3_to_f32(scale_code), packed);
  return scale_code;
}

void dequantize_block_fp4(const uint8_t* packed, size_t n, float scale, float* out) {
  for (size_t i = 0; i < n; i += 2) {
    out[i] = e2m1_to_f32(e2m1_low(packed[i / 2])) * scale;
    out[i + 1] = e2m1_to_f32(e2m1_high(packed[i / 2])) * scale;
  }
}

void fake_quant_fp8(float* x, size_t n, size_t block) {
  std::vector<uint8_t> codes(block);
  for (size_t b = 0; b < n; b += block) {
    const size_t len = std::min(block, n - b);
    const uint8_t s = quantize_block_fp8(x + b, len, codes.data());
    dequantize_block_fp8(codes.data(), len, s, x + b);
  }
}

void fake_quant_fp4_e8m0(float* x, size_t n, size_t block) {
  std::vector<uint8_t> packed(block / 2);
  for (size_t b = 0; b < n; b += block) {
    const uint8_t s = quantize_block_fp4_e8m0(x + b, block, packed.data());
    dequantize_block_fp4(packed.data(), block, e8m0_to_f32(s), x + b);
  }
}

void fake_quant_fp4_e4m3(float* x, size_t n, size_t block) {
  std::vector<uint8_t> packed(block / 2);
  for (size_t b = 0; b < n; b += block) {
    const uint8_t s = quantize_block_fp4_e4m3(x + b, block, packed.data());
    dequantize_block_fp4(packed.data(), block, e4m3_to_f32(s), x + b);
  }
}

}  // namespace flashdesk
