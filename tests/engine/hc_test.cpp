// mHC ops of every backend against an independent double-precision implementation of
// docs/model-spec.md §4.1 written here, and hand-computed collapse / expand values.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

using HcTest = BackendTest;

struct Mixes {
  std::vector<double> pre, post, comb;
};

// The mixes of one token in double precision.
Mixes reference_mixes(const std::vector<float>& x, const std::vector<float>& fn,
                      const std::vector<float>& base, const std::vector<float>& scale, int hc,
                      int iters, double eps, double hc_eps) {
  const size_t flat = x.size(), n_mix = static_cast<size_t>((2 + hc) * hc);
  double ms = 0;
  for (float v : x) ms += double(v) * v;
  const double r = 1.0 / std::sqrt(ms / double(flat) + eps);
  std::vector<double> m(n_mix);
  for (size_t j = 0; j < n_mix; ++j) {
    double acc = 0;
    for (size_t e = 0; e < flat; ++e) acc += double(x[e]) * fn[j * flat + e];
    m[j] = acc * r;
  }
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  Mixes out;
  for (int j = 0; j < hc; ++j) {
    out.pre.push_back(sig(m[j] * scale[0] + base[j]) + hc_eps);
    out.post.push_back(2.0 * sig(m[hc + j] * scale[1] + base[hc + j]));
  }
  std::vector<double> c(static_cast<size_t>(hc * hc));
  for (int j = 0; j < hc * hc; ++j) c[j] = m[2 * hc + j] * scale[2] + base[2 * hc + j];
  for (int j = 0; j < hc; ++j) {
    double mx = -1e300, sum = 0;
    for (int k = 0; k < hc; ++k) mx = std::max(mx, c[j * hc + k]);
    for (int k = 0; k < hc; ++k) sum += std::exp(c[j * hc + k] - mx);
    for (int k = 0; k < hc; ++k) c[j * hc + k] = std::exp(c[j * hc + k] - mx) / sum + hc_eps;
  }
  auto cols = [&] {
    for (int k = 0; k < hc; ++k) {
      double s = 0;
      for (int j = 0; j < hc; ++j) s += c[j * hc + k];
      for (int j = 0; j < hc; ++j) c[j * hc + k] /= s + hc_eps;
    }
  };
  cols();
  for (int it = 1; it < iters; ++it) {
    for (int j = 0; j < hc; ++j) {
      double s = 0;
      for (int k = 0; k < hc; ++k) s += c[j * hc + k];
      for (int k = 0; k < hc; ++k) c[j * hc + k] /= s + hc_eps;
    }
    cols();
  }
  out.comb = c;
  return out;
}

TEST_P(HcTest, MixesMatchDoublePrecisionReference) {
  const int hc = 4, d = 64, n = 3, n_mix = (2 + hc) * hc;
  const auto x = bf16_values(static_cast<size_t>(n * hc * d), 1, 2.0f);
  const auto fn = bf16_values(static_cast<size_t>(n_mix * hc * d), 2, 0.1f);
  const auto base = bf16_values(static_cast<size_t>(n_mix), 3, 0.5f);
  const std::vector<float> scale = {0.7f, 1.3f, 2.0f};
  HcParams p{f32(Shape{n_mix, hc * d}, fn), f32(Shape{n_mix}, base), f32(Shape{3}, scale)};
  HcSettings s{hc, 1e-20f, 1e-6f, 20};
  Tensor pre = be().alloc(DType::F32, Shape{n, hc}), post = be().alloc(DType::F32, Shape{n, hc});
  Tensor comb = be().alloc(DType::F32, Shape{n, hc, hc});
  be().hc_mixes(f32(Shape{n, hc, d}, x), p, s, pre, post, comb);
  const auto gp = host<float>(pre), gq = host<float>(post), gc = host<float>(comb);
  for (int i = 0; i < n; ++i) {
    std::vector<float> xi(x.begin() + i * hc * d, x.begin() + (i + 1) * hc * d);
    const Mixes want = reference_mixes(xi, fn, base, scale, hc, 20, 1e-20, 1e-6);
    // FP32 vs double over 256-long dots and 20 Sinkhorn rounds: a few FP32 ulps.
    for (int j = 0; j < hc; ++j) {
      EXPECT_NEAR(gp[i * hc + j], want.pre[j], 1e-5);
      EXPECT_NEAR(gq[i * hc + j], want.post[j], 1e-5);
    }
    for (int j = 0; j < hc * hc; ++j) EXPECT_NEAR(gc[i * hc * hc + j], want.comb[j], 1e-5);
    for (int k = 0; k < hc; ++k) {  // Sinkhorn output is (nearly) doubly stochastic
      double col = 0;
      for (int j = 0; j < hc; ++j) col += gc[i * hc * hc + j * hc + k];
      EXPECT_NEAR(col, 1.0, 1e-4);
    }
  }
}

TEST_P(HcTest, CollapseAndExpandByHand) {
  // hc = 2, D = 2. X_0 = [1, 2], X_1 = [3, 4].
  Tensor X = f32(Shape{1, 2, 2}, {1, 2, 3, 4});
  Tensor pre = f32(Shape{1, 2}, {0.5f, 0.25f}), u = be().alloc(DType::F32, Shape{1, 2});
  be().hc_collapse(X, pre, u);
  EXPECT_EQ(host<float>(u), (std::vector<float>{1.25f, 2.0f}));
  // out_k = post_k * y + sum_j comb[j][k] X_j; comb = [[1, 0.5], [0, 2]].
  Tensor y = f32(Shape{1, 2}, {10, 20}), post = f32(Shape{1, 2}, {1, 0.5f});
  Tensor comb = f32(Shape{1, 2, 2}, {1, 0.5f, 0, 2}), out = be().alloc(DType::F32, Shape{1, 2, 2});
  be().hc_expand(X, y, post, comb, out);
  EXPECT_EQ(host<float>(out), (std::vector<float>{11, 22, 5 + 0.5f + 6, 10 + 1 + 8}));
}

// The fused sublayer boundaries: rms_norm (weight w) of the collapse, and the expansion's streams
// with the collapse of those.
TEST_P(HcTest, CollapseAndNormByHand) {
  Tensor X = f32(Shape{1, 2, 2}, {1, 2, 3, 4});
  Tensor pre = f32(Shape{1, 2}, {0.5f, 0.25f}), w = f32(Shape{2}, {1, 2});
  const auto normed = [](double a, double b) {  // [a, b] normed, times w
    const double r = 1.0 / std::sqrt((a * a + b * b) / 2.0);
    return std::vector<double>{a * r, 2.0 * b * r};
  };
  const auto expect_bf16 = [](const std::vector<float>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 4e-3 * std::abs(want[i]));
  };
  Tensor u = be().alloc(DType::F32, Shape{1, 2});
  be().hc_collapse_norm(X, pre, w, 0.0f, u);
  expect_bf16(host<float>(u), normed(1.25, 2.0));
  Tensor y = f32(Shape{1, 2}, {10, 20}), post = f32(Shape{1, 2}, {1, 0.5f});
  Tensor comb = f32(Shape{1, 2, 2}, {1, 0.5f, 0, 2}), out = be().alloc(DType::F32, Shape{1, 2, 2});
  be().hc_expand_collapse_norm(X, y, post, comb, pre, w, 0.0f, out, u);
  EXPECT_EQ(host<float>(out), (std::vector<float>{11, 22, 5 + 0.5f + 6, 10 + 1 + 8}));
  expect_bf16(host<float>(u), normed(0.5 * 11 + 0.25 * 11.5, 0.5 * 22 + 0.25 * 19));
}

FD_BACKEND_TEST_SUITE(HcTest);

}  // namespace
}  // namespace flashdesk::test
