// RMSNorm, mHC mixes and MoE experts of the optimised CPU backend against the reference backend
// on random inputs (odd sizes, one and many rows): every ISA sums in the reference's order, so
// the outputs must be the reference's bits (tolerance 0 ulps).
#include <numeric>
#include <vector>

#include "tests/engine/cpu_opt_test_util.h"

namespace flashdesk::test {
namespace {

using CpuOptOpsTest = OptTest;

TEST_P(CpuOptOpsTest, RmsNormMatchesTheReferenceWithinOneBf16Ulp) {
  Rng rng(21);
  for (const auto& [n, d, weighted] :
       {std::tuple{1, 320, true}, std::tuple{7, 37, false}, std::tuple{300, 128, true}}) {
    Tensor x = f32(Shape{n, d}, rng.bf16s(static_cast<size_t>(n * d), 4.0f));
    Tensor w = f32(Shape{d}, rng.bf16s(static_cast<size_t>(d), 2.0f));
    Tensor a = ref().alloc(DType::F32, Shape{n, d}), b = ref().alloc(DType::F32, Shape{n, d});
    ref().rms_norm(x, weighted ? &w : nullptr, 1e-6f, a);
    opt().rms_norm(x, weighted ? &w : nullptr, 1e-6f, b);
    const auto want = host<float>(a), got = host<float>(b);
    EXPECT_EQ(got, want) << n << " x " << d;
  }
}

TEST_P(CpuOptOpsTest, HcMixesMatchTheReference) {
  Rng rng(23);
  const HcSettings s{4, 1e-20f, 1e-6f, 20};
  for (const auto& [n, d] : {std::pair{1, 320}, std::pair{3, 37}, std::pair{70, 64}}) {
    const int64_t flat = 4 * d, n_mix = 24;
    HcParams p{f32(Shape{n_mix, flat}, rng.floats(static_cast<size_t>(n_mix * flat), 0.05f)),
               f32(Shape{n_mix}, rng.bf16s(n_mix, 1.0f)), f32(Shape{3}, {0.7f, 1.3f, 2.0f})};
    Tensor X = f32(Shape{n, 4, d}, rng.bf16s(static_cast<size_t>(n * flat), 3.0f));
    Tensor pre[2], post[2], comb[2];
    Backend* bes[2] = {&ref(), &opt()};
    for (int b = 0; b < 2; ++b) {
      pre[b] = ref().alloc(DType::F32, Shape{n, 4});
      post[b] = ref().alloc(DType::F32, Shape{n, 4});
      comb[b] = ref().alloc(DType::F32, Shape{n, 4, 4});
      bes[b]->hc_mixes(X, p, s, pre[b], post[b], comb[b]);
    }
    for (Tensor* t : {pre, post, comb}) {
      const auto want = host<float>(t[0]), got = host<float>(t[1]);
      EXPECT_EQ(got, want) << n << " x " << d;
    }
  }
}

class CpuOptMoeTest : public OptTest {
 protected:
  // n rows, k distinct experts of E per row, routing weights in (0, 1.5).
  void run(int64_t n, int64_t d, int64_t inter, int64_t E, int64_t k, bool with_null,
           uint32_t seed) {
    Rng rng(seed);
    std::vector<ExpertWeights> ex;
    for (int64_t e = 0; e < E; ++e)
      ex.push_back({weight(WeightFormat::Fp4Row, inter, d, rng),
                    weight(WeightFormat::Fp4Row, inter, d, rng),
                    weight(WeightFormat::Fp4Row, d, inter, rng)});
    ExpertWeights shared{weight(WeightFormat::Fp8Block, inter, d, rng),
                         weight(WeightFormat::Fp8Block, inter, d, rng),
                         weight(WeightFormat::Fp8Block, d, inter, rng)};
    std::vector<const ExpertWeights*> ptrs;
    for (auto& e : ex) ptrs.push_back(&e);
    if (with_null) ptrs[1] = nullptr;
    std::vector<int32_t> ids;
    std::vector<float> w;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int32_t> perm(static_cast<size_t>(E));
      std::iota(perm.begin(), perm.end(), 0);
      for (int64_t j = 0; j < k; ++j) {
        std::swap(perm[j], perm[j + rng.next() % (E - j)]);
        ids.push_back(perm[j]);
        w.push_back(0.05f + 1.4f * rng.uniform());
      }
    }
    Tensor x = f32(Shape{n, d}, rng.bf16s(static_cast<size_t>(n * d), 2.0f));
    Tensor idt = make(DType::I32, Shape{n, k}, ids), wt = f32(Shape{n, k}, w);
    Tensor a = ref().alloc(DType::F32, Shape{n, d}), b = ref().alloc(DType::F32, Shape{n, d});
    ref().moe_experts(x, idt, wt, ptrs, &shared, 10.0f, a);
    opt().moe_experts(x, idt, wt, ptrs, &shared, 10.0f, b);
    EXPECT_EQ(host<float>(b), host<float>(a)) << n << " rows";
  }
};

TEST_P(CpuOptMoeTest, ExpertsMatchTheReferenceForOneAndManyRows) {
  run(1, 64, 96, 6, 2, false, 1);
  run(2, 96, 64, 5, 3, false, 2);
  run(5, 64, 64, 6, 2, true, 3);     // an expert on another device
  run(40, 128, 96, 8, 2, false, 4);  // experts with several rows: the panel path
}

FD_OPT_TEST_SUITE(CpuOptOpsTest);
FD_OPT_TEST_SUITE(CpuOptMoeTest);

}  // namespace
}  // namespace flashdesk::test
