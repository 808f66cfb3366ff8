// Conversions between FP32 and the narrow formats, plus their decode tables.
#include "engine/util/numeric.h"

#include <array>
#include <limits>

namespace flashdesk {
namespace {

// Built at compile time from the bit layout, so the table is ready before any static initialiser.
constexpr float decode_e4m3(uint8_t code) {
  const uint32_t sign = code >> 7;
  const uint32_t exp = (code >> 3) & 0xF;
  const uint32_t mant = code & 0x7;
  if (exp == 0xF && mant == 0x7) return std::bit_cast<float>(0x7FC00000u | (sign << 31));
  if (exp == 0) {
    const float v = static_cast<float>(mant) * (1.0f / 512.0f);  // subnormal: mant/8 * 2^-6
    return sign ? -v : v;
  }
  return std::bit_cast<float>((sign << 31) | ((exp - 7 + 127) << 23) | (mant << 20));
}

constexpr std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = decode_e4m3(static_cast<uint8_t>(i));
  return t;
}

constexpr std::array<float, 256> kE4M3Table = make_e4m3_table();

}  // namespace

const float kE4M3ToF32[256] = {
#define FD_E(i) kE4M3Table[i]
#define FD_E8(i) \
  FD_E(i), FD_E(i + 1), FD_E(i + 2), FD_E(i + 3), FD_E(i + 4), FD_E(i + 5), FD_E(i + 6), FD_E(i + 7)
#define FD_E64(i)                                                                     \
  FD_E8(i), FD_E8(i + 8), FD_E8(i + 16), FD_E8(i + 24), FD_E8(i + 32), FD_E8(i + 40), \
      FD_E8(i + 48), FD_E8(i + 56)
    FD_E64(0), FD_E64(64), FD_E64(128), FD_E64(192)
#undef FD_E64
#undef FD_E8
#undef FD_E
};

const float kE2M1ToF32[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

uint8_t f32_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a < 0x1p-6f) {
    // Subnormal range: steps of 2^-9; a result of 8 steps is the smallest normal (code 0x08).
    const float steps = std::nearbyint(a * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(steps));
  }
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;                    // a = (2m) * 2^exp, 2m in [1, 2)
  float mant = std::nearbyint((2.0f * m - 1.0f) * 8.0f);
  if (mant == 8.0f) {
    mant = 0.0f;
    ++exp;
  }
  int field = exp + 7;
  if (field > 15 || (field == 15 && mant > 6.0f)) return static_cast<uint8_t>(sign | 0x7E);  // 448
  return static_cast<uint8_t>(sign | (field << 3) | static_cast<int>(mant));
}

uint8_t f32_to_e2m1(float f) {
  const uint8_t sign = std::signbit(f) ? 0x8 : 0x0;
  const float a = std::fabs(f);
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
    code = 7;  // also NaN-free saturation of large values
  return static_cast<uint8_t>(sign | code);
}

}  // namespace flashdesk
