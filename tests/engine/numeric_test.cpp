// Narrow number formats and block quantisers against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/util/numeric.h"
#include "engine/util/quant.h"

namespace flashdesk {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(E4M3, DecodesKnownCodes) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);     // exp 7, mant 0
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);   // largest finite
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0xBC), -1.5f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
}

TEST(E4M3, EncodeRoundTripsEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    const float v = e4m3_to_f32(static_cast<uint8_t>(c));
    const uint8_t back = f32_to_e4m3(v);
    EXPECT_EQ(e4m3_to_f32(back), v) << "code " << c;
  }
}

TEST(E4M3, TiesGoToEvenMantissa) {
  // Between 1.0 (mant 0) and 1.125 (mant 1): 1.0625 -> 1.0.
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1.0625f)), 1.0f);
  // Between 1.125 (mant 1) and 1.25 (mant 2): 1.1875 -> 1.25.
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1.1875f)), 1.25f);
  // Subnormal tie: 1.5 * 2^-9 -> 2 * 2^-9.
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1.5f * 0x1p-9f)), 2 * 0x1p-9f);
  // Rounding up across a binade: 15.5 lies between 15 and 16 -> 16 (mantissa overflow).
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(15.5f)), 16.0f);
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1000.0f)), 448.0f);
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(-1000.0f)), -448.0f);
}

TEST(E8M0, CeilLog2OnBits) {
  EXPECT_EQ(e8m0_ceil_code(1.0f), 127);
  EXPECT_EQ(e8m0_ceil_code(1.5f), 128);  // ceil(log2 1.5) = 1
  EXPECT_EQ(e8m0_ceil_code(0.25f), 125);
  EXPECT_EQ(e8m0_to_f32(130), 8.0f);
}

TEST(E2M1, RoundingTable) {
  const float in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, 0.3f, -2.9f};
  const float want[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, 6.0f, 0.5f, -3.0f};
  for (size_t i = 0; i < std::size(in); ++i)
    EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(in[i])), want[i]) << in[i];
  EXPECT_EQ(e2m1_pack(0x3, 0xA), 0xA3);  // low nibble = even column
}

TEST(BlockQuant, Fp8ScaleIsCeilPowerOfTwo) {
  std::vector<float> x(32, 0.0f);
  x[0] = 900.0f;  // amax/448 = 2.0089 -> scale 4
  x[1] = -3.0f;   // -3/4 = -0.75 -> e4m3 exact
  x[2] = 5.0f;    // 1.25 -> exact
  std::vector<uint8_t> codes(32);
  const uint8_t s = quantize_block_fp8(x.data(), x.size(), codes.data());
  EXPECT_EQ(e8m0_to_f32(s), 4.0f);
  std::vector<float> back(32);
  dequantize_block_fp8(codes.data(), 32, s, back.data());
  EXPECT_EQ(back[0], 896.0f);  // 225 -> 224 (e4m3 step 16 in [128,256)... 225/16 rounds to 14)
  EXPECT_EQ(back[1], -3.0f);
  EXPECT_EQ(back[2], 5.0f);
}

TEST(BlockQuant, Fp8ZeroBlockUsesFloor) {
  std::vector<float> x(32, 0.0f);
  std::vector<uint8_t> codes(32);
  const uint8_t s = quantize_block_fp8(x.data(), x.size(), codes.data());
  EXPECT_EQ(s, e8m0_ceil_code(1e-4f / 448.0f));
  for (uint8_t c : codes) EXPECT_EQ(c, 0);
}

TEST(BlockQuant, Fp4E8M0) {
  std::vector<float> x(32, 0.0f);
  x[0] = 12.0f;  // amax/6 = 2 -> scale 2, 12/2 = 6
  x[1] = 2.5f;   // 1.25 -> 1 -> 2.0
  x[2] = -7.0f;  // -3.5 -> -4 -> -8
  std::vector<uint8_t> packed(16);
  const uint8_t s = quantize_block_fp4_e8m0(x.data(), 32, packed.data());
  EXPECT_EQ(e8m0_to_f32(s), 2.0f);
  std::vector<float> back(32);
  dequantize_block_fp4(packed.data(), 32, e8m0_to_f32(s), back.data());
  EXPECT_EQ(back[0], 12.0f);
  EXPECT_EQ(back[1], 2.0f);
  EXPECT_EQ(back[2], -8.0f);
}

TEST(BlockQuant, Fp4E4M3ScaleIsRoundedToE4M3) {
  std::vector<float> x(16, 0.0f);
  x[0] = 7.0f;  // amax/6 = 1.1667 -> e4m3 1.125; 7/1.125 = 6.22 -> 6 -> 6.75
  x[1] = 1.0f;  // 0.889 -> 1 -> 1.125
  std::vector<uint8_t> packed(8);
  const uint8_t s = quantize_block_fp4_e4m3(x.data(), 16, packed.data());
  EXPECT_EQ(e4m3_to_f32(s), 1.125f);
  std::vector<float> back(16);
  dequantize_block_fp4(packed.data(), 16, e4m3_to_f32(s), back.data());
  EXPECT_FLOAT_EQ(back[0], 6.75f);
  EXPECT_FLOAT_EQ(back[1], 1.125f);
}

}  // namespace
}  // namespace flashdesk
