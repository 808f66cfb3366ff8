// RMSNorm, RoPE, BF16 rounding, FP4 fake-quant and the embedding lookup of every backend,
// against hand-computed values (tolerance: 1 BF16 ulp where the result is rounded to BF16).
#include <cmath>
#include <numbers>
#include <vector>

#include "engine/util/quant.h"
#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

using OpsTest = BackendTest;

TEST_P(OpsTest, RmsNormMatchesTheFormula) {
  // Row [3, 4]: mean square 12.5, so y = w * x / sqrt(12.5).
  Tensor x = f32(Shape{2, 2}, {3, 4, 0, 0}), w = f32(Shape{2}, {1.0f, 2.0f});
  Tensor y = be().alloc(DType::F32, Shape{2, 2});
  be().rms_norm(x, &w, 1e-20f, y);
  const auto out = host<float>(y);
  EXPECT_LE(bf16_ulps(out[0], 3.0 / std::sqrt(12.5)), 0.5);
  EXPECT_LE(bf16_ulps(out[1], 2.0 * 4.0 / std::sqrt(12.5)), 0.5);
  EXPECT_EQ(out[2], 0.0f);  // zero row with a tiny eps: 0 * 1e10 = 0, no NaN
  be().rms_norm(x, nullptr, 1e-20f, y);
  EXPECT_LE(bf16_ulps(host<float>(y)[1], 4.0 / std::sqrt(12.5)), 0.5);
}

TEST_P(OpsTest, RopeRotatesInterleavedPairsOfTheTailOnly) {
  // head_dim 6, rope_dim 4 (last four values: pairs (2,3) and (4,5)), two heads.
  const std::vector<float> freq = {0.5f, 0.25f};
  std::vector<float> v = {7, 7, 1, 0, 0, 1, 7, 7, 1, 0, 0, 1};
  Tensor x = f32(Shape{1, 2, 6}, v);
  const std::vector<int64_t> pos = {2};  // angles 1.0 and 0.5 rad
  be().rope(x, 6, pos, freq, false);
  const auto out = host<float>(x);
  for (int h = 0; h < 2; ++h) {
    const float* o = &out[h * 6];
    EXPECT_EQ(o[0], 7.0f);
    EXPECT_EQ(o[1], 7.0f);
    EXPECT_LE(bf16_ulps(o[2], std::cos(1.0)), 0.5);  // (1, 0) -> (cos, sin)
    EXPECT_LE(bf16_ulps(o[3], std::sin(1.0)), 0.5);
    EXPECT_LE(bf16_ulps(o[4], -std::sin(0.5)), 0.5);  // (0, 1) -> (-sin, cos)
    EXPECT_LE(bf16_ulps(o[5], std::cos(0.5)), 0.5);
  }
  be().rope(x, 6, pos, freq, true);  // the inverse rotation restores the input within rounding
  const auto back = host<float>(x);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], 2 * bf16_ulp(1.0)) << i;
}

TEST_P(OpsTest, RoundAndScale) {
  Tensor x = f32(Shape{2}, {1.0f + 0x1p-9f, 3.0f});
  be().round_bf16(x);
  be().scale(x, 0.5f);
  const auto out = host<float>(x);
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 1.5f);
}

TEST_P(OpsTest, FakeQuantFp4UsesPowerOfTwoScalesPerBlock) {
  // Block of 32 with amax 3: scale 2^ceil(log2(0.5)) = 0.5, codes: 3 -> 6, 1.1 -> 2.2 -> 2 (1.0).
  std::vector<float> v(32, 0.0f);
  v[0] = 3.0f;
  v[1] = 1.1f;
  v[2] = -0.3f;  // -0.6 -> nearest E2M1 -0.5 -> -0.25
  Tensor x = f32(Shape{1, 32}, v);
  be().fake_quant_fp4_e8m0(x, 32);
  const auto out = host<float>(x);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], -0.25f);
}

TEST_P(OpsTest, EmbedCopiesRowsIntoEveryStream) {
  std::vector<uint16_t> table = {f32_to_bf16(1), f32_to_bf16(2), f32_to_bf16(-3), f32_to_bf16(4)};
  Tensor t = make(DType::BF16, Shape{2, 2}, table);
  Tensor rows = be().alloc(DType::F32, Shape{2, 2}), X = be().alloc(DType::F32, Shape{2, 3, 2});
  const std::vector<int32_t> ids = {1, 0};
  be().embed(t, ids, rows, X);
  EXPECT_EQ(host<float>(rows), (std::vector<float>{-3, 4, 1, 2}));
  EXPECT_EQ(host<float>(X), (std::vector<float>{-3, 4, -3, 4, -3, 4, 1, 2, 1, 2, 1, 2}));
}

TEST_P(OpsTest, GatherAndScatterRows) {
  Tensor src = f32(Shape{3, 2}, {0, 1, 10, 11, 20, 21}), dst = be().zeros(DType::F32, Shape{2, 2});
  const std::vector<int64_t> rows = {2, 0};
  be().gather_rows(src, rows, dst);
  EXPECT_EQ(host<float>(dst), (std::vector<float>{20, 21, 0, 1}));
  Tensor big = be().zeros(DType::F32, Shape{4, 2});
  const std::vector<int64_t> from = {0, 1}, to = {3, 1};
  be().scatter_rows(dst, from, big, to);
  EXPECT_EQ(host<float>(big), (std::vector<float>{0, 0, 0, 1, 0, 0, 20, 21}));
}

FD_BACKEND_TEST_SUITE(OpsTest);

}  // namespace
}  // namespace flashdesk::test
