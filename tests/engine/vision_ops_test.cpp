// The vision ops (engine/ops/vision_ops.h) on every CPU backend against hand-computed values and
// a double-precision scalar reference written here. Tolerance: 1 BF16 ulp for bf16 outputs (the
// FP32 result may round to the other side of a tie with the double reference).
#include <cmath>
#include <vector>

#include "engine/ops/vision_ops.h"
#include "engine/vision/vision_encoder.h"
#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

class VisionOpsTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    ops_ = make_vision_ops(be());
  }
  VisionOps& ops() { return *ops_; }

 private:
  std::unique_ptr<VisionOps> ops_;
};

TEST_P(VisionOpsTest, AddBiasRoundsTheFp32Sum) {
  // 1 + 2^-9 is not a bf16 value: the sum rounds to 1 (ties to even), 1.5 + 0.25 is exact.
  Tensor y = f32(Shape{2, 2}, {1.0f, 1.5f, -3.0f, 0.0f});
  const Tensor b = f32(Shape{2}, {std::ldexp(1.0f, -9), 0.25f});
  ops().add_bias_bf16(y, b);
  EXPECT_EQ(host<float>(y), (std::vector<float>{1.0f, 1.75f, -3.0f, 0.25f}));
}

TEST_P(VisionOpsTest, ResidualAddRounds) {
  Tensor x = f32(Shape{3}, {1.0f, 256.0f, -2.0f});
  ops().add_bf16(x, f32(Shape{3}, {0.5f, 1.0f, 2.0f}));
  // 257 needs 9 significant bits: bf16 has 8, the tie rounds to even (256).
  EXPECT_EQ(host<float>(x), (std::vector<float>{1.5f, 256.0f, 0.0f}));
}

TEST_P(VisionOpsTest, SwigluAndGeluMatchTheirFormulas) {
  const std::vector<float> g = bf16_values(6, 3, 4.0f), u = bf16_values(6, 4, 2.0f);
  std::vector<float> gu;
  for (int r = 0; r < 2; ++r) {
    gu.insert(gu.end(), g.begin() + 3 * r, g.begin() + 3 * r + 3);
    gu.insert(gu.end(), u.begin() + 3 * r, u.begin() + 3 * r + 3);
  }
  Tensor out = be().alloc(DType::F32, Shape{2, 3});
  ops().swiglu_bf16(f32(Shape{2, 6}, gu), out);
  Tensor x = f32(Shape{6}, g);
  ops().gelu_bf16(x);
  const auto got = host<float>(out), gel = host<float>(x);
  for (size_t i = 0; i < 6; ++i) {
    const double gi = g[i];
    EXPECT_LE(bf16_ulps(got[i], gi / (1.0 + std::exp(-gi)) * u[i]), 1.0) << i;
    EXPECT_LE(bf16_ulps(gel[i], 0.5 * gi * (1.0 + std::erf(gi / std::sqrt(2.0)))), 1.0) << i;
  }
}

TEST_P(VisionOpsTest, PixelUnshuffleOrdersCellsChannelMajorWithZeroPadding) {
  // A 2x4 grid of 2 channels, r = 3: one row of two cells, the second cell's last column and
  // the third row of both cells padding. feats[p][c] = 10 * p + c + 1.
  std::vector<float> f;
  for (int p = 0; p < 8; ++p)
    for (int c = 0; c < 2; ++c) f.push_back(static_cast<float>(10 * p + c + 1));
  Tensor out = be().alloc(DType::F32, Shape{2, 18});
  ops().pixel_unshuffle(f32(Shape{8, 2}, f), 2, 4, 3, out);
  const auto o = host<float>(out);
  // Cell 0, channel 0: kh 0 = patches 0,1,2; kh 1 = patches 4,5,6; kh 2 = padding.
  EXPECT_EQ(std::vector<float>(o.begin(), o.begin() + 9),
            (std::vector<float>{1, 11, 21, 41, 51, 61, 0, 0, 0}));
  // Cell 1, channel 1 (offset 18 + 9): patches 3, pad, pad; 7, pad, pad; padding row.
  EXPECT_EQ(std::vector<float>(o.begin() + 27, o.end()),
            (std::vector<float>{32, 0, 0, 72, 0, 0, 0, 0, 0}));
}

// Double-precision reference of vit_attention for one head layout.
std::vector<double> attention_reference(const std::vector<float>& qkv, int64_t P, int64_t H,
                                        int64_t hd, const std::vector<float>& cs,
                                        const std::vector<float>& sn, double scale) {
  const int64_t dim = H * hd, half = hd / 2;
  auto rotated = [&](int64_t p, int64_t h, int64_t part) {
    std::vector<double> r(static_cast<size_t>(hd));
    const float* x = qkv.data() + p * 3 * dim + part * dim + h * hd;
    for (int64_t i = 0; i < half; ++i) {
      const double c = cs[static_cast<size_t>(p * half + i)],
                   s = sn[static_cast<size_t>(p * half + i)];
      r[static_cast<size_t>(i)] = x[i] * c - x[i + half] * s;
      r[static_cast<size_t>(i + half)] = x[i + half] * c + x[i] * s;
    }
    return r;
  };
  std::vector<double> out(static_cast<size_t>(P * dim));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t p = 0; p < P; ++p) {
      const auto q = rotated(p, h, 0);
      std::vector<double> w(static_cast<size_t>(P));
      double mx = -1e300, sum = 0.0;
      for (int64_t s = 0; s < P; ++s) {
        const auto k = rotated(s, h, 1);
        double dot = 0.0;
        for (int64_t i = 0; i < hd; ++i)
          dot += q[static_cast<size_t>(i)] * k[static_cast<size_t>(i)];
        w[static_cast<size_t>(s)] = dot * scale;
        mx = std::max(mx, w[static_cast<size_t>(s)]);
      }
      for (double& v : w) sum += (v = std::exp(v - mx));
      for (int64_t s = 0; s < P; ++s)
        for (int64_t i = 0; i < hd; ++i)
          out[static_cast<size_t>(p * dim + h * hd + i)] +=
              w[static_cast<size_t>(s)] / sum *
              qkv[static_cast<size_t>(s * 3 * dim + 2 * dim + h * hd + i)];
    }
  return out;
}

TEST_P(VisionOpsTest, AttentionMatchesDoubleReferenceWithRotateHalfRope) {
  const int64_t n_h = 3, n_w = 4, P = n_h * n_w, H = 2, hd = 8;
  const std::vector<float> qkv = bf16_values(static_cast<size_t>(P * 3 * H * hd), 7, 2.0f);
  std::vector<float> cs, sn;
  vit_rope_tables(hd, 10000.0, n_h, n_w, cs, sn);
  Tensor out = be().alloc(DType::F32, Shape{P, H * hd});
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ops().vit_attention(f32(Shape{P, 3 * H * hd}, qkv), H, cs, sn, scale, out);
  const auto got = host<float>(out);
  const auto want = attention_reference(qkv, P, H, hd, cs, sn, scale);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(bf16_ulps(got[i], want[i]), 1.0) << i;
}

TEST(VitRopeTables, PhasesAreRowThenColumnTimesInverseFrequencies) {
  // head_dim 8: 4 phases per patch, inv_freq = [1, 10000^-0.5] = [1, 0.01].
  std::vector<float> cs, sn;
  vit_rope_tables(8, 10000.0, 2, 3, cs, sn);
  ASSERT_EQ(cs.size(), 6u * 4u);
  const size_t patch = 1 * 3 + 2;  // row 1, column 2
  const double want[4] = {1.0, 0.01, 2.0, 0.02};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(cs[patch * 4 + i], std::cos(want[i]), 1e-6) << i;
    EXPECT_NEAR(sn[patch * 4 + i], std::sin(want[i]), 1e-6) << i;
  }
}

FD_BACKEND_TEST_SUITE(VisionOpsTest);

}  // namespace
}  // namespace flashdesk::test
