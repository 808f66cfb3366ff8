// Linear ops of every backend against hand-computed values and a double-precision GEMM over the
// independently dequantised weights. Tolerance: 1 BF16 ulp for BF16 outputs (the FP32 sum may
// round to the other side), 1e-5 relative for FP32 outputs.
#include <vector>

#include "engine/util/quant.h"
#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

class LinearTest : public BackendTest {
 protected:
  LinearWeight fp8_weight(int64_t out, int64_t in, const std::vector<uint8_t>& codes,
                          const std::vector<uint8_t>& scales) {
    LinearWeight w;
    w.format = WeightFormat::Fp8Block;
    w.out = out;
    w.in = in;
    w.data = make(DType::F8_E4M3, Shape{out, in}, codes);
    w.scale = make(DType::F8_E8M0, Shape{(out + 31) / 32, (in + 31) / 32}, scales);
    w.name = "test.fp8";
    return w;
  }
  LinearWeight fp4_weight(int64_t out, int64_t in, const std::vector<uint8_t>& packed,
                          const std::vector<uint8_t>& scales) {
    LinearWeight w;
    w.format = WeightFormat::Fp4Row;
    w.out = out;
    w.in = in;
    w.data = make(DType::I8, Shape{out, in / 2}, packed);
    w.scale = make(DType::F8_E8M0, Shape{out, in / 32}, scales);
    w.name = "test.fp4";
    return w;
  }
};

TEST_P(LinearTest, Fp8QuantisesTheInputPerBlockOf32) {
  // Row 0: weight 1.0 everywhere (code 0x38, scale 2^0). x[1] = 0.3 in a block with amax 1:
  // act_quant scale 2^-8, 0.3 * 256 = 76.8 -> nearest E4M3 80 -> 0.3125.
  std::vector<uint8_t> codes(2 * 64, 0x38), scales = {127, 126};  // block 1 scaled by 0.5
  std::vector<float> x(64, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.3f;
  x[40] = 2.0f;  // second K block: weight 1.0 * 0.5
  LinearWeight w = fp8_weight(2, 64, codes, scales);
  Tensor xt = f32(Shape{1, 64}, x), y = be().alloc(DType::F32, Shape{1, 2});
  be().linear(xt, w, kQuantLinear, y);
  const auto out = host<float>(y);
  EXPECT_EQ(out[0], 1.0f + 0.3125f + 1.0f);
  EXPECT_EQ(out[1], out[0]);
  // Used as BF16 (wo_a): no act_quant, so 0.3 stays bf16(0.3).
  be().linear(xt, w, kBf16Linear, y);
  EXPECT_EQ(host<float>(y)[0], round_bf16(1.0f + round_bf16(0.3f) + 1.0f));
}

TEST_P(LinearTest, Fp4ReadsLowNibbleAsEvenColumn) {
  // Column 0 = code 2 (1.0) in the low nibble, column 1 = code 7 (6.0) in the high nibble;
  // scale code 128 = 2.0.
  std::vector<uint8_t> packed(16, 0);
  packed[0] = e2m1_pack(2, 7);
  LinearWeight w = fp4_weight(1, 32, packed, {128});
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  Tensor y = be().alloc(DType::F32, Shape{1, 1});
  be().linear(f32(Shape{1, 32}, x), w, kQuantLinear, y);
  EXPECT_EQ(host<float>(y)[0], 2.0f);
  x[0] = 0.0f;
  x[1] = 1.0f;
  be().linear(f32(Shape{1, 32}, x), w, kQuantLinear, y);
  EXPECT_EQ(host<float>(y)[0], 12.0f);
}

TEST_P(LinearTest, Fp8MatchesDoublePrecisionGemmWithinOneBf16Ulp) {
  const int64_t n = 5, in = 96, out = 40;  // two tile rows, three tile columns
  std::vector<uint8_t> codes(static_cast<size_t>(out * in)), scales(2 * 3);
  for (size_t i = 0; i < codes.size(); ++i) {
    codes[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
    if ((codes[i] & 0x7F) == 0x7F) codes[i] = 0x30;  // no NaN codes
  }
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(120 + i);
  LinearWeight w = fp8_weight(out, in, codes, scales);
  std::vector<float> x = bf16_values(static_cast<size_t>(n * in), 7, 3.0f);
  Tensor y = be().alloc(DType::F32, Shape{n, out});
  be().linear(f32(Shape{n, in}, x), w, kQuantLinear, y);
  const auto got = host<float>(y);
  std::vector<float> xq = x;
  for (int64_t i = 0; i < n; ++i) fake_quant_fp8(&xq[i * in], static_cast<size_t>(in), 32);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double want = 0;
      for (int64_t k = 0; k < in; ++k)
        want += double(xq[i * in + k]) * e4m3_to_f32(codes[o * in + k]) *
                e8m0_to_f32(scales[(o / 32) * 3 + k / 32]);
      EXPECT_LE(bf16_ulps(got[i * out + o], want), 1.0) << i << "," << o;
      EXPECT_EQ(got[i * out + o], round_bf16(got[i * out + o]));  // output is BF16
    }
}

TEST_P(LinearTest, F32ModeKeepsTheFp32Sum) {
  std::vector<uint16_t> wbits = {f32_to_bf16(1.0f), f32_to_bf16(1.0f)};
  LinearWeight w;
  w.format = WeightFormat::Bf16;
  w.out = 1;
  w.in = 2;
  w.data = make(DType::BF16, Shape{1, 2}, wbits);
  Tensor y = be().alloc(DType::F32, Shape{1, 1});
  // 1 + 2^-10 is not a BF16 value: FP32 mode keeps it, BF16 mode rounds it to 1.
  Tensor x = f32(Shape{1, 2}, {1.0f, 0x1p-10f});
  be().linear(x, w, kF32Linear, y);
  EXPECT_EQ(host<float>(y)[0], 1.0f + 0x1p-10f);
  be().linear(x, w, kBf16Linear, y);
  EXPECT_EQ(host<float>(y)[0], 1.0f);
}

TEST_P(LinearTest, GroupedLinearReadsEachGroupsSlice) {
  // 2 groups, in_g = 2, out_g = 1: w rows = [1, 2] and [3, 4] (F32 storage, BF16 values).
  LinearWeight w;
  w.format = WeightFormat::F32;
  w.out = 2;
  w.in = 2;
  w.data = f32(Shape{2, 2}, {1, 2, 3, 4});
  Tensor x = f32(Shape{1, 4}, {1, 1, 10, 100}), y = be().alloc(DType::F32, Shape{1, 2});
  be().grouped_linear(x, w, 2, y);
  const auto out = host<float>(y);
  EXPECT_EQ(out[0], 3.0f);                        // 1*1 + 2*1
  EXPECT_EQ(out[1], round_bf16(30.0f + 400.0f));  // 3*10 + 4*100 = 430 -> bf16 430
}

FD_BACKEND_TEST_SUITE(LinearTest);

}  // namespace
}  // namespace flashdesk::test
