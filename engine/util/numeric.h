// Scalar number formats of the V4.1 checkpoint and caches: BF16, FP8 E4M3, E8M0 and FP4 E2M1,
// with the exact rounding rules of docs/model-spec.md §3.8 (round to nearest, ties to even).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace flashdesk {

// ---- BF16 -------------------------------------------------------------------------------------
inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(uint32_t{h} << 16);
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// The value a BF16 tensor would hold: models the reference's BF16 activations on FP32 buffers.
inline float round_bf16(float f) {
  return bf16_to_f32(f32_to_bf16(f));
}

// ---- FP8 E4M3 (e4m3fn: bias 7, no infinities, max 448, 0x7F/0xFF are NaN) ---------------------
extern const float kE4M3ToF32[256];
inline float e4m3_to_f32(uint8_t code) {
  return kE4M3ToF32[code];
}
// Round to nearest even; values beyond ±448 saturate to ±448 (the reference clamps first).
uint8_t f32_to_e4m3(float f);

// ---- E8M0 (unsigned power of two, bias 127; 0xFF is NaN) -------------------------------------
inline float e8m0_to_f32(uint8_t code) {
  if (code == 0) return std::ldexp(1.0f, -127);
  return std::bit_cast<float>(uint32_t{code} << 23);
}
// The E8M0 code of 2^ceil(log2(v)) for a positive, normal v, computed on the FP32 bit pattern
// (exponent + 1 when the mantissa is non-zero), exactly as the reference does.
inline uint8_t e8m0_ceil_code(float v) {
  uint32_t u = std::bit_cast<uint32_t>(v);
  uint32_t e = (u >> 23) & 0xFFu;
  return static_cast<uint8_t>(e + ((u & 0x7FFFFFu) != 0 ? 1u : 0u));
}

// ---- FP4 E2M1 (codes 0..7 = 0,0.5,1,1.5,2,3,4,6; bit 3 = sign) ------------------------------
extern const float kE2M1ToF32[16];
inline float e2m1_to_f32(uint8_t code) {
  return kE2M1ToF32[code & 0xF];
}
// Round to nearest, ties to the even code (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4,
// 5->4); magnitudes above 6 saturate to 6.
uint8_t f32_to_e2m1(float f);

// Packed pairs: low nibble = even column, high nibble = odd column.
inline uint8_t e2m1_low(uint8_t byte) {
  return byte & 0xF;
}
inline uint8_t e2m1_high(uint8_t byte) {
  return byte >> 4;
}
inline uint8_t e2m1_pack(uint8_t even, uint8_t odd) {
  return static_cast<uint8_t>((even & 0xF) | ((odd & 0xF) << 4));
}

}  // namespace flashdesk
