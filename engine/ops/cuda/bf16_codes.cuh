// FP4 (E2M1) and FP8 (E4M3) codes decoded into BF16 pairs, the layout of an mma fragment register
// (the lower index in the low half): the experts' prefill kernels (moe_grouped*.cu) decode their
// FP4 weights with these, the prefill attention (attention_tc.cu) its staged keys. Every value
// they make is exact in BF16, so the bits are those of the FP32 decoders of device_numeric.cuh
// rounded to BF16 (tests/cuda/kv_quant_test.cpp checks every code).
#pragma once

#include <cstdint>

#include "engine/ops/cuda/cuda_compat.cuh"
#include "engine/ops/cuda/kernel_util.cuh"

namespace flashdesk::cuda {

// v * scale per BF16 half (fma with -0, which keeps a zero's sign): exact where the product is a
// BF16 value (E2M1 times a power of two or an E4M3 value; E4M3 times a power of two).
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t v, uint32_t scale) {
#ifdef FLASHDESK_CUDA_EMU
  const auto half = [](uint32_t x, uint32_t s) -> uint32_t {
    return f32_to_bf16_bits(bf16_bits_to_f32(x & 0xFFFFu) * bf16_bits_to_f32(s & 0xFFFFu));
  };
  return half(v, scale) | (half(v >> 16, scale >> 16) << 16);
#else
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(v), "r"(scale), "r"(0x80008000u));
  return d;
#endif
}

// Eight FP4 (E2M1) codes, code i in nibble i, times the BF16x2 `scale` as BF16 pairs (codes 0 1,
// 2 3, 4 5, 6 7; the even code in the low half). A code's magnitude picks the high and the low
// byte of its BF16 value from two byte tables (prmt), its sign goes to the high byte, and one
// BF16x2 multiply by the power-of-two scale is exact: about 3 instructions a code, where
// converting through FP32 took about 10 (the kernel was issue-bound on that decoding).
__device__ __forceinline__ void e2m1x8_to_bf16(uint32_t w, uint32_t scale, uint32_t (&r)[4]) {
  // BF16 of 0, 0.5, 1, 1.5 | 2, 3, 4, 6: high bytes 00 3F 3F 3F | 40 40 40 40, low bytes
  // 00 00 80 C0 | 00 40 80 C0.
  constexpr uint32_t kHigh03 = 0x3F3F3F00u, kHigh47 = 0x40404040u;
  constexpr uint32_t kLow03 = 0xC0800000u, kLow47 = 0xC0804000u;
  FD_UNROLL
  for (int h = 0; h < 2; ++h) {
    const uint32_t x = h == 0 ? w : w >> 16;  // codes 4h .. 4h + 3 in the low 16 bits
    const uint32_t magnitudes = x & 0x7777u;
    const uint32_t low = __byte_perm(kLow03, kLow47, magnitudes);
    // Code j's sign (bit 4j + 3 of x) to bit 7 of byte j: the two code bytes, each twice.
    const uint32_t twice = __byte_perm(x, 0, 0x1100);
    const uint32_t high = __byte_perm(kHigh03, kHigh47, magnitudes) | ((twice << 4) & 0x00800080u) |
                          (twice & 0x80008000u);
    r[2 * h] = scale_bf16x2(__byte_perm(low, high, 0x5140), scale);
    r[2 * h + 1] = scale_bf16x2(__byte_perm(low, high, 0x7362), scale);
  }
}

// lo and hi rounded to BF16 (nearest even) as one pair, lo in the low half: one conversion where
// f32_to_bf16_bits takes about five instructions a value. The bits are f32_to_bf16_bits' for every
// value but NaN (the device's NaN has no payload).
__device__ __forceinline__ uint32_t bf16x2_rn(float lo, float hi) {
#ifdef FLASHDESK_CUDA_EMU
  return static_cast<uint32_t>(f32_to_bf16_bits(lo)) |
         (static_cast<uint32_t>(f32_to_bf16_bits(hi)) << 16);
#else
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#endif
}

// Eight FP4 codes (code i in nibble i) times 2^(scale_code - 127) (a UE8M0 scale) as four BF16
// pairs, where every product is a normal BF16 value or zero: scale codes 2..252. False
// otherwise (the caller decodes through FP32).
__device__ __forceinline__ bool e2m1x8_pow2_to_bf16(uint32_t w, uint32_t scale_code,
                                                    uint32_t (&r)[4]) {
  if (scale_code < 2u || scale_code > 252u) return false;
  const uint32_t factor = scale_code << 7;  // BF16 2^(scale_code - 127)
  e2m1x8_to_bf16(w, factor | (factor << 16), r);
  return true;
}

// Four FP8 E4M3 codes (code i in byte i of w) times 2^(scale_code - 127) (a UE8M0 scale), as two
// BF16 pairs, where the result is a normal BF16 value or zero for every code: a code's magnitude
// bits at the bottom of a BF16 exponent give code * 2^-120 (a BF16 subnormal for E4M3's own
// subnormals), and one BF16x2 multiply by 2^(scale_code - 7) scales it back, exactly. That holds
// for scale codes 10..134 (E4M3's smallest value 2^-9 then stays normal, 2^(scale_code - 7) is a
// BF16 value) and no NaN code (0x7F, 0xFF); false otherwise, and the caller decodes through FP32
// (e4m3x4_to_bf16_exact). About 3 instructions a code, where the FP32 path takes about 12.
__device__ __forceinline__ bool e4m3x4_to_bf16(uint32_t w, uint32_t scale_code, uint2* r) {
  const bool nan = (((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u) != 0;
  if (nan || scale_code < 10u || scale_code > 134u) return false;
  const uint32_t factor = (scale_code + 120u) << 7;  // BF16 2^(scale_code - 7)
  const uint32_t factor2 = factor | (factor << 16);
  const uint32_t lo = __byte_perm(w, 0, 0x4140), hi = __byte_perm(w, 0, 0x4342);
  r->x = scale_bf16x2(((lo << 4) & 0x07F007F0u) | ((lo << 8) & 0x80008000u), factor2);
  r->y = scale_bf16x2(((hi << 4) & 0x07F007F0u) | ((hi << 8) & 0x80008000u), factor2);
  return true;
}

// The same for any scale and code, through FP32 (the definition's order: the code's value times
// the scale, rounded to BF16).
__device__ __forceinline__ uint2 e4m3x4_to_bf16_exact(uint32_t w, uint32_t scale_code) {
  const float sc = e8m0_to_f32(scale_code);
  uint16_t v[4];
  FD_UNROLL
  for (int i = 0; i < 4; ++i) v[i] = f32_to_bf16_bits(e4m3_exact((w >> (8 * i)) & 0xFFu) * sc);
  return uint2{static_cast<uint32_t>(v[0]) | (static_cast<uint32_t>(v[1]) << 16),
               static_cast<uint32_t>(v[2]) | (static_cast<uint32_t>(v[3]) << 16)};
}

// BF16 bits of an E4M3 code's value, twice (both halves): an FP4 entry's scale for
// e2m1x8_scaled_bf16 (E2M1 times E4M3 has at most 6 significant bits: exact in BF16). E4M3 values
// are BF16 values, so the FP32 bits' high half is exact (a NaN code's stays a NaN).
__device__ __forceinline__ uint32_t e4m3_bf16x2(uint32_t code) {
  return __byte_perm(__float_as_uint(e4m3_exact(code)), 0, 0x3232);
}

// Eight FP8 window-row codes (lo: codes 0-3, hi: 4-7) times their UE8M0 scale as four BF16 pairs:
// the fast path where it holds, else through FP32.
__device__ __forceinline__ uint4 e4m3x8_to_bf16(uint32_t lo, uint32_t hi, uint32_t scale_code) {
  uint2 a, b;
  if (!e4m3x4_to_bf16(lo, scale_code, &a)) a = e4m3x4_to_bf16_exact(lo, scale_code);
  if (!e4m3x4_to_bf16(hi, scale_code, &b)) b = e4m3x4_to_bf16_exact(hi, scale_code);
  return uint4{a.x, a.y, b.x, b.y};
}

// Eight FP4 entry codes (code i in nibble i) times their E4M3 scale, given as e4m3_bf16x2's pair,
// as four BF16 pairs.
__device__ __forceinline__ uint4 e2m1x8_scaled_bf16(uint32_t w, uint32_t scale_bf16x2) {
  uint32_t r[4];
  e2m1x8_to_bf16(w, scale_bf16x2, r);
  return uint4{r[0], r[1], r[2], r[3]};
}

}  // namespace flashdesk::cuda
