// MoE routing and experts of every backend: hand-computed routing (bias for selection only,
// normalised and scaled weights, ties), and the expert sum against a double-precision
// computation with the same BF16 rounding points (tolerance: 2 BF16 ulps of the row's largest
// output, since a rounding flip of an intermediate moves the output by about one ulp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/util/numeric.h"
#include "engine/util/quant.h"
#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

using MoeTest = BackendTest;

double sqrt_softplus(double z) {
  return std::sqrt(std::log1p(std::exp(z)));
}

TEST_P(MoeTest, BiasSelectsButDoesNotWeigh) {
  Tensor logits = f32(Shape{2, 4}, {0, 1, 2, -1, 3, 3, 3, 3});
  Tensor bias = f32(Shape{4}, {0, 0, -1, 1}), ids = be().alloc(DType::I32, Shape{2, 2});
  Tensor img_bias = f32(Shape{4}, {0, 0, 0, 0});
  Tensor w = be().alloc(DType::F32, Shape{2, 2});
  const std::vector<uint8_t> image = {0, 1};
  be().moe_route(logits, bias, &img_bias, image, RouteSettings{2, 1.0f, 1.5f, true}, ids, w);
  const auto gi = host<int32_t>(ids);
  const auto gw = host<float>(w);
  // Row 0: biased scores [0.83, 1.15, 0.46, 1.56] -> experts 3 then 1, weights from s alone.
  EXPECT_EQ(gi[0], 3);
  EXPECT_EQ(gi[1], 1);
  const double s3 = sqrt_softplus(-1), s1 = sqrt_softplus(1);
  EXPECT_NEAR(gw[0], 1.5 * s3 / (s3 + s1), 1e-6);
  EXPECT_NEAR(gw[1], 1.5 * s1 / (s3 + s1), 1e-6);
  // Row 1 is an image row (zero bias) with four equal scores: torch.topk's CPU tie-break (as the
  // official code picks; torch 1.13 and 2.11 both return 2 then 3 here), weights 0.75.
  EXPECT_EQ(gi[2], 2);
  EXPECT_EQ(gi[3], 3);
  EXPECT_NEAR(gw[2], 0.75, 1e-6);
}

class MoeExpertsTest : public BackendTest {
 protected:
  static constexpr int64_t kD = 32, kI = 64;

  LinearWeight fp4(int64_t out, int64_t in, uint32_t seed) {
    std::vector<uint8_t> packed(static_cast<size_t>(out * in / 2)),
        sc(static_cast<size_t>(out * in / 32));
    for (size_t i = 0; i < packed.size(); ++i)
      packed[i] = static_cast<uint8_t>((i * 97 + seed * 31) % 256);
    for (size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<uint8_t>(122 + (i + seed) % 3);
    LinearWeight w{WeightFormat::Fp4Row,
                   out,
                   in,
                   32,
                   make(DType::I8, Shape{out, in / 2}, packed),
                   make(DType::F8_E8M0, Shape{out, in / 32}, sc),
                   "fp4"};
    return w;
  }
  LinearWeight fp8(int64_t out, int64_t in, uint32_t seed) {
    std::vector<uint8_t> codes(static_cast<size_t>(out * in));
    for (size_t i = 0; i < codes.size(); ++i) {
      codes[i] = static_cast<uint8_t>((i * 53 + seed * 7) % 256);
      if ((codes[i] & 0x7F) >= 0x60) codes[i] &= 0x8F;  // keep magnitudes moderate, no NaN
    }
    std::vector<uint8_t> sc(static_cast<size_t>(((out + 31) / 32) * ((in + 31) / 32)), 122);
    return LinearWeight{WeightFormat::Fp8Block,
                        out,
                        in,
                        32,
                        make(DType::F8_E4M3, Shape{out, in}, codes),
                        make(DType::F8_E8M0, Shape{(out + 31) / 32, (in + 31) / 32}, sc),
                        "fp8"};
  }
  ExpertWeights expert(bool routed, uint32_t seed) {
    if (routed) return {fp4(kI, kD, seed), fp4(kI, kD, seed + 1), fp4(kD, kI, seed + 2)};
    return {fp8(kI, kD, seed), fp8(kI, kD, seed + 1), fp8(kD, kI, seed + 2)};
  }

  // The expert in double with the reference's rounding points.
  std::vector<double> expert_out(const ExpertWeights& ex, const std::vector<float>& x,
                                 double weight, float limit) {
    auto lin = [&](const LinearWeight& w, std::vector<float> in) {
      fake_quant_fp8(in.data(), in.size(), 32);
      std::vector<double> out(static_cast<size_t>(w.out));
      for (int64_t o = 0; o < w.out; ++o) {
        double acc = 0;
        for (int64_t k = 0; k < w.in; ++k) acc += double(in[k]) * weight_value(w, o, k);
        out[o] = round_bf16(static_cast<float>(acc));
      }
      return out;
    };
    auto g = lin(ex.w1, x), u = lin(ex.w3, x);
    std::vector<float> a(static_cast<size_t>(kI));
    for (int64_t j = 0; j < kI; ++j) {
      const double gv = std::min(g[j], double(limit)),
                   uv = std::clamp(u[j], -double(limit), double(limit));
      a[j] = round_bf16(static_cast<float>(gv / (1 + std::exp(-gv)) * uv * weight));
    }
    return lin(ex.w2, a);
  }

  // Weight element (o, k) decoded from the stored bytes, independently of the backend.
  double weight_value(const LinearWeight& w, int64_t o, int64_t k) {
    const auto data = host<uint8_t>(w.data);
    const auto sc = host<uint8_t>(w.scale);
    if (w.format == WeightFormat::Fp4Row) {
      const uint8_t b = data[o * w.in / 2 + k / 2];
      return e2m1_to_f32(k % 2 ? b >> 4 : b & 0xF) * e8m0_to_f32(sc[o * (w.in / 32) + k / 32]);
    }
    return e4m3_to_f32(data[o * w.in + k]) *
           e8m0_to_f32(sc[(o / 32) * ((w.in + 31) / 32) + k / 32]);
  }
};

TEST_P(MoeExpertsTest, SumOfWeightedExpertsAndSharedMatchesDoublePrecision) {
  const int64_t n = 3;
  std::vector<ExpertWeights> ex = {expert(true, 1), expert(true, 4), expert(true, 7)};
  ExpertWeights shared = expert(false, 10);
  const auto x = bf16_values(static_cast<size_t>(n * kD), 9, 2.0f);
  const std::vector<int32_t> ids = {2, 0, 1, 2, 0, 1};
  const std::vector<float> w = {0.5f, 1.25f, 1.0f, 0.25f, 0.75f, 0.75f};
  std::vector<const ExpertWeights*> ptrs = {&ex[0], &ex[1], &ex[2]};
  Tensor y = be().alloc(DType::F32, Shape{n, kD});
  const float limit = 1.5f;  // low enough that the clamp acts on these weights
  be().moe_experts(f32(Shape{n, kD}, x), make(DType::I32, Shape{n, 2}, ids), f32(Shape{n, 2}, w),
                   ptrs, &shared, limit, y);
  const auto got = host<float>(y);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> xi(x.begin() + i * kD, x.begin() + (i + 1) * kD);
    std::vector<double> want(kD, 0.0);
    for (int j = 0; j < 2; ++j) {
      const auto o = expert_out(ex[ids[i * 2 + j]], xi, w[i * 2 + j], limit);
      for (int64_t e = 0; e < kD; ++e) want[e] += o[e];
    }
    const auto so = expert_out(shared, xi, 1.0, limit);
    double mx = 0;
    for (int64_t e = 0; e < kD; ++e) mx = std::max(mx, std::fabs(want[e] += so[e]));
    for (int64_t e = 0; e < kD; ++e)
      EXPECT_LE(std::fabs(got[i * kD + e] - want[e]), 2 * bf16_ulp(mx));
  }
  // An expert on another device (null) contributes nothing: rows 0 and 2 lose expert 2's part.
  ptrs[2] = nullptr;
  Tensor y2 = be().alloc(DType::F32, Shape{n, kD});
  be().moe_experts(f32(Shape{n, kD}, x), make(DType::I32, Shape{n, 2}, ids), f32(Shape{n, 2}, w),
                   ptrs, nullptr, limit, y2);
  std::vector<float> x1(x.begin() + kD, x.begin() + 2 * kD);
  const auto only = expert_out(ex[1], x1, 1.0, limit);
  const auto g2 = host<float>(y2);
  for (int64_t e = 0; e < kD; ++e) EXPECT_LE(std::fabs(g2[kD + e] - only[e]), bf16_ulp(only[e]));
}

// The shared expert's term computed first (beside the router where a backend gains from it,
// StepRunner::moe) and the routed experts then with it added last give moe_experts' values: the
// Backend defaults on the CPU backends, to the bit.
TEST_P(MoeExpertsTest, SharedTermAheadThenRoutedGivesTheSameSum) {
  const int64_t n = 3;
  std::vector<ExpertWeights> ex = {expert(true, 1), expert(true, 4), expert(true, 7)};
  ExpertWeights shared = expert(false, 10);
  const Tensor x = f32(Shape{n, kD}, bf16_values(static_cast<size_t>(n * kD), 9, 2.0f));
  const Tensor ids = make(DType::I32, Shape{n, 2}, std::vector<int32_t>{2, 0, 1, 2, 0, 1});
  const Tensor w = f32(Shape{n, 2}, {0.5f, 1.25f, 1.0f, 0.25f, 0.75f, 0.75f});
  const std::vector<const ExpertWeights*> ptrs = {&ex[0], &ex[1], &ex[2]};
  Tensor whole = be().alloc(DType::F32, Shape{n, kD}), term = be().alloc(DType::F32, Shape{n, kD}),
         ahead = be().alloc(DType::F32, Shape{n, kD});
  be().moe_experts(x, ids, w, ptrs, &shared, 1.5f, whole);
  be().moe_shared_expert(x, shared, 1.5f, term);
  be().moe_routed_experts_plus(x, ids, w, ptrs, term, 1.5f, ahead);
  EXPECT_EQ(host<float>(ahead), host<float>(whole));
  // Rounded where summed (one device): the same sums' BF16 values.
  Tensor rounded = be().alloc(DType::F32, Shape{n, kD});
  be().moe_experts_rounded(x, ids, w, ptrs, &shared, 1.5f, rounded);
  std::vector<float> want = host<float>(whole);
  for (float& v : want) v = round_bf16(v);
  EXPECT_EQ(host<float>(rounded), want);
}

FD_BACKEND_TEST_SUITE(MoeTest);
FD_BACKEND_TEST_SUITE(MoeExpertsTest);

}  // namespace
}  // namespace flashdesk::test
