// Cache row formats (FP8 window, FP4 entries, FP4 index keys) and the compressor pooling of every
// backend, against hand-computed bytes and values.
#include <cmath>
#include <vector>

#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

using KvTest = BackendTest;

TEST_P(KvTest, WindowRowIsFp8CodesThenUe8m0Scales) {
  std::vector<float> x(64, 1.0f);
  x[33] = 4.0f;
  Tensor rows = be().zeros(DType::U8, Shape{2, kv_row_bytes(KvFormat::Fp8Window, 64)});
  be().quantize_rows(KvFormat::Fp8Window, f32(Shape{1, 64}, x), rows, 1);
  const auto b = host<uint8_t>(rows);
  const uint8_t* r = &b[66];
  // Block 0: amax 1 -> scale 2^ceil(log2(1/448)) = 2^-8 (E8M0 code 119); 1.0 -> 256 = E4M3 0x78.
  EXPECT_EQ(r[0], 0x78);
  EXPECT_EQ(r[64], 119);
  // Block 1: amax 4 -> 2^-6 (code 121); 1.0 -> 64 = 0x68, 4.0 -> 256 = 0x78.
  EXPECT_EQ(r[32], 0x68);
  EXPECT_EQ(r[33], 0x78);
  EXPECT_EQ(r[65], 121);
  EXPECT_EQ(b[0], 0);  // row 0 untouched
  Tensor back = be().alloc(DType::F32, Shape{1, 64});
  be().dequantize_rows(KvFormat::Fp8Window, rows, 1, back);
  EXPECT_EQ(host<float>(back), x);
}

TEST_P(KvTest, EntryRowIsFp4CodesThenE4m3ScalesPerSixteen) {
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;
  x[1] = 3.0f;
  Tensor rows = be().zeros(DType::U8, Shape{1, kv_row_bytes(KvFormat::Fp4Entry, 32)});
  be().quantize_rows(KvFormat::Fp4Entry, f32(Shape{1, 32}, x), rows, 0);
  const auto b = host<uint8_t>(rows);
  ASSERT_EQ(b.size(), 18u);
  EXPECT_EQ(b[0], 0x57);   // 6.0 -> code 7 (low nibble), 3.0 -> code 5 (high nibble), scale 1.0
  EXPECT_EQ(b[16], 0x38);  // E4M3 1.0
  EXPECT_EQ(b[17], 0x01);  // all-zero block: amax floor 6*2^-9 -> scale 2^-9 = E4M3 0x01
}

TEST_P(KvTest, KeyRowIsFp4CodesThenOneUe8m0ScalePerThirtyTwo) {
  std::vector<float> x(32, 0.0f);
  x[31] = -12.0f;  // amax 12 -> scale 2 (code 128); -12/2 = -6 -> code 15 in the high nibble
  Tensor rows = be().zeros(DType::U8, Shape{1, kv_row_bytes(KvFormat::Fp4Key, 32)});
  be().quantize_rows(KvFormat::Fp4Key, f32(Shape{1, 32}, x), rows, 0);
  const auto b = host<uint8_t>(rows);
  ASSERT_EQ(b.size(), 17u);
  EXPECT_EQ(b[15], 0xF0);
  EXPECT_EQ(b[16], 128);
}

TEST_P(KvTest, RoundTripErrorsStayWithinHalfACodeStep) {
  const int64_t dim = 128;
  const auto x = bf16_values(static_cast<size_t>(3 * dim), 5, 4.0f);
  for (KvFormat f : {KvFormat::Fp8Window, KvFormat::Fp4Entry, KvFormat::Fp4Key}) {
    Tensor rows = be().alloc(DType::U8, Shape{3, kv_row_bytes(f, dim)});
    be().quantize_rows(f, f32(Shape{3, dim}, x), rows, 0);
    Tensor back = be().alloc(DType::F32, Shape{3, dim});
    be().dequantize_rows(f, rows, 0, back);
    const auto y = host<float>(back);
    // FP8 E4M3: half an ulp = 2^-4 relative (plus the block scale's subnormal step);
    // FP4 E2M1: steps of up to 2 at 4..6 on a scale with amax near 6: error <= 1 * scale <= amax/3.
    const double rel = f == KvFormat::Fp8Window ? 0.0625 : 0.34;
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_LE(std::fabs(y[i] - x[i]),
                rel * (f == KvFormat::Fp8Window ? std::fabs(x[i]) : 4.0) + 1e-3)
          << "format " << static_cast<int>(f) << " at " << i;
  }
}

TEST_P(KvTest, CompressorPoolsPairsWithPerChannelSoftmaxAndCarriesTheOddToken) {
  // Ratio 2, D = 2. Group 0: channel 0 scores equal -> mean; channel 1 softmax [1/4, 3/4].
  const float ln3 = std::log(3.0f);
  Tensor kv = f32(Shape{3, 2}, {1, 2, 3, 4, 5, 6}), sc = f32(Shape{3, 2}, {0, 0, 0, ln3, 0, 0});
  Tensor pk = be().zeros(DType::F32, Shape{2, 2}), ps = be().zeros(DType::F32, Shape{2, 2});
  int64_t pending = 0;
  Tensor out = be().alloc(DType::F32, Shape{1, 2});
  be().compressor_pool(kv, sc, 2, pk, ps, pending, out);
  const auto o = host<float>(out);
  EXPECT_EQ(o[0], 2.0f);
  EXPECT_NEAR(o[1], 3.5f, 3.5 * 0x1p-8);  // bf16 of the FP32 sum
  EXPECT_EQ(pending, 1);
  // The next step completes the pending pair: (5 + 7) / 2, (6 + 8) / 2.
  Tensor kv2 = f32(Shape{1, 2}, {7, 8}), sc2 = f32(Shape{1, 2}, {0, 0});
  be().compressor_pool(kv2, sc2, 2, pk, ps, pending, out);
  EXPECT_EQ(host<float>(out), (std::vector<float>{6, 7}));
  EXPECT_EQ(pending, 0);
}

FD_BACKEND_TEST_SUITE(KvTest);

}  // namespace
}  // namespace flashdesk::test
