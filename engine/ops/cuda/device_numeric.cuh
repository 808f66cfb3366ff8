// The number formats of docs/numerics.md on the device (and on the host, for the emulation): BF16
// rounding, FP8 E4M3, UE8M0 and FP4 E2M1 decode and encode, bit for bit the rules of
// engine/util/numeric.h (round to nearest even, the same saturation), so quantised codes written
// by a kernel equal those of the CPU reference.
#pragma once

#include <cstdint>

#ifdef FLASHDESK_CUDA_EMU
#include "engine/ops/cuda/emu/cuda_emu.h"
#else
#include <cuda_runtime.h>
#endif

#define FD_DEV __device__ __forceinline__

namespace flashdesk::cuda {

// ---- BF16
// -----------------------------------------------------------------------------------------
FD_DEV uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
FD_DEV float bf16_bits_to_f32(uint32_t h) {
  return __uint_as_float(h << 16);
}
FD_DEV float round_bf16(float f) {
  return bf16_bits_to_f32(f32_to_bf16_bits(f));
}

// ---- E8M0
// -----------------------------------------------------------------------------------------
FD_DEV float e8m0_to_f32(uint32_t code) {
  return code == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(code << 23);  // 2^-127
}
// 2^ceil(log2(v)) as an E8M0 code for a positive normal v (exponent + 1 when the mantissa is set).
FD_DEV uint8_t e8m0_ceil_code(float v) {
  const uint32_t u = __float_as_uint(v);
  return static_cast<uint8_t>(((u >> 23) & 0xFFu) + ((u & 0x7FFFFFu) != 0 ? 1u : 0u));
}

// ---- FP8 E4M3 (e4m3fn)
// ----------------------------------------------------------------------------
FD_DEV float e4m3_to_f32(uint32_t code) {
  const uint32_t sign = (code & 0x80u) << 24, exp = (code >> 3) & 0xFu, mant = code & 0x7u;
  if (exp == 0xFu && mant == 0x7u) return __uint_as_float(0x7FC00000u | sign);
  const float normal = __uint_as_float(sign | ((exp + 120u) << 23) | (mant << 20));
  const float sub =
      __uint_as_float(sign | __float_as_uint(static_cast<float>(mant) * 0.001953125f));
  return exp != 0 ? normal : sub;
}
// e4m3_to_f32 without branches: the code's magnitude bits placed at the bottom of an FP32
// exponent give code * 2^-120 exactly (normal or denormal), which 2^120 scales back; 0x7F and
// 0xFF are NaN. The same values, bit for bit (kv_quant_test checks every code).
FD_DEV float e4m3_exact(uint32_t code) {
  const uint32_t sign = (code & 0x80u) << 24;
  const float v = __uint_as_float(sign | ((code & 0x7Fu) << 20)) * 0x1p120f;
  return (code & 0x7Fu) == 0x7Fu ? __uint_as_float(0x7FC00000u | sign) : v;
}
// Round to nearest even; beyond ±448 saturates to ±448 (callers clamp first, like the reference).
FD_DEV uint8_t f32_to_e4m3(float f) {
  if (f != f) return 0x7F;
  const uint32_t u = __float_as_uint(f);
  const uint8_t sign = (u >> 31) ? 0x80 : 0x00;
  const float a = __uint_as_float(u & 0x7FFFFFFFu);
  if (a < 0.015625f) {  // 2^-6: subnormal steps of 2^-9; 8 steps is the smallest normal (0x08)
    const float steps = rintf(a * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(steps));
  }
  const uint32_t au = __float_as_uint(a);
  int exp = static_cast<int>((au >> 23) & 0xFFu) - 127;
  float mant = rintf(static_cast<float>(au & 0x7FFFFFu) * 9.5367431640625e-07f);  // * 2^-20
  if (mant == 8.0f) {
    mant = 0.0f;
    ++exp;
  }
  const int field = exp + 7;
  if (field > 15 || (field == 15 && mant > 6.0f)) return static_cast<uint8_t>(sign | 0x7E);
  return static_cast<uint8_t>(sign | (field << 3) | static_cast<int>(mant));
}

// ---- FP4 E2M1
// ---------------------------------------------------------------------------------------
FD_DEV float e2m1_to_f32(uint32_t code) {
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6: code c (1..7) = 2^(e-1) * (1 + m/2) with e = c >> 1, m = c & 1.
  const uint32_t c = code & 0x7u;
  const float mag = c < 2 ? 0.5f * static_cast<float>(c)
                          : __uint_as_float(((c >> 1) + 126u) << 23) * (1.0f + 0.5f * (c & 1u));
  return (code & 0x8u) ? -mag : mag;
}
// e2m1_to_f32 without branches: magnitude bits at the bottom of the exponent give
// code * 2^-126 exactly, which 2^126 scales back (kv_quant_test checks every code).
FD_DEV float e2m1_exact(uint32_t code) {
  return __uint_as_float(((code & 0x8u) << 28) | ((code & 0x7u) << 22)) * 0x1p126f;
}
FD_DEV uint8_t f32_to_e2m1(float f) {
  const uint8_t sign = (__float_as_uint(f) >> 31) ? 0x8 : 0x0;
  const float a = fabsf(f);
  uint8_t code;
  if (a <= 0.25f)
    code = 0;
  else if (a < 0.75f)
    code = 1;
  else if (a <= 1.25f)
    code = 2;
  else if (a < 1.75f)
    code = 3;
  else if (a <= 2.5f)
    code = 4;
  else if (a < 3.5f)
    code = 5;
  else if (a <= 5.0f)
    code = 6;
  else
    code = 7;
  return static_cast<uint8_t>(sign | code);
}

// ---- block scales (docs/numerics.md "Quantisers") ---------------------------------------------
// act_quant / FP8 window rows: the UE8M0 scale code of a block with absolute maximum amax.
FD_DEV uint8_t fp8_scale_code(float amax) {
  return e8m0_ceil_code(fmaxf(amax, 1e-4f) * (1.0f / 448.0f));
}
FD_DEV uint8_t fp8_code(float x, float scale) {
  return f32_to_e4m3(fminf(fmaxf(x / scale, -448.0f), 448.0f));
}
// x * inv_s rounded to E4M3 (nearest even, clamped to +-448), as a value: f32_to_e4m3 then
// e4m3_to_f32 without the codes. inv_s = 1 / s for a power of two s, so x * inv_s is x / s
// exactly.
FD_DEV float e4m3_round(float x, float inv_s) {
  const float y = fminf(fmaxf(x * inv_s, -448.0f), 448.0f);
  const uint32_t u = __float_as_uint(y);
  const float normal = __uint_as_float((u + 0x7FFFFu + ((u >> 20) & 1u)) & 0xFFF00000u);
  const float sub = copysignf(__fsub_rn(__fadd_rn(fabsf(y), 16384.0f), 16384.0f), y);  // 2^-9 steps
  return fabsf(y) < 0.015625f ? sub : normal;
}
// e4m3_round of each of v, in place: on sm_89+ by the hardware's conversions, two values an
// instruction (to E4M3 codes and back through F16, exact), a third of the bit arithmetic's
// instructions (an 8K-token prefill's GEMM staging 120 -> 62 us at 8192 x 5120).
template <int N>
FD_DEV void e4m3_round_values(float (&v)[N], float inv_s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(FLASHDESK_CUDA_EMU)
#pragma unroll
  for (int e = 0; e < N; e += 2) {
    const float a = fminf(fmaxf(v[e] * inv_s, -448.0f), 448.0f);
    const float b = e + 1 < N ? fminf(fmaxf(v[e + 1] * inv_s, -448.0f), 448.0f) : 0.0f;
    uint16_t codes;
    uint32_t halves;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(codes) : "f"(b), "f"(a));
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(halves) : "h"(codes));
    float lo, hi;
    asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
        : "=f"(lo), "=f"(hi)
        : "r"(halves));
    v[e] = lo;
    if (e + 1 < N) v[e + 1] = hi;
  }
#else
  for (int e = 0; e < N; ++e) v[e] = e4m3_round(v[e], inv_s);
#endif
}
// FP4 with a UE8M0 scale (index keys and queries, block 32).
FD_DEV uint8_t fp4_e8m0_scale_code(float amax) {
  return e8m0_ceil_code(fmaxf(amax, 6.0f * 1.1754943508222875e-38f) * (1.0f / 6.0f));
}
// FP4 with an E4M3 scale (compressed main KV, block 16): the scale is e4m3(amax / 6).
FD_DEV uint8_t fp4_e4m3_scale_code(float amax) {
  return f32_to_e4m3(fmaxf(amax, 6.0f * 0.001953125f) / 6.0f);
}
FD_DEV uint8_t fp4_code(float x, float scale) {
  return f32_to_e2m1(fminf(fmaxf(x / scale, -6.0f), 6.0f));
}

}  // namespace flashdesk::cuda
