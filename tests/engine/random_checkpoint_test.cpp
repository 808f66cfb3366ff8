// The random checkpoint writer: documented PRNG, determinism, value scales, quantisation as real
// checkpoints do it, and the Engram token map.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/dequant.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/random_init.h"
#include "engine/util/numeric.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

using testing::TempDir;

const std::filesystem::path kEveryRole = testing::config_asset("test-every-role.json");

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double{x} * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

double mean(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}

TEST(RandomInit, PrngKnownValues) {
  SplitMix64 rng(0);  // the published splitmix64 sequence from state 0
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(RandomInit, NormalsHaveUnitVariance) {
  SplitMix64 rng(42);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n / 2; ++i) {
    double a, b;
    rng.normal_pair(a, b);
    sum += a + b;
    sq += a * a + b * b;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

TEST(RandomCheckpoint, SameSeedSameBytesWhateverTheThreads) {
  TempDir a, b, c;
  write_random_checkpoint(kEveryRole, a.path(), testing::random_options(21, 0, 1));
  write_random_checkpoint(kEveryRole, b.path(), testing::random_options(21, 0, 3));
  write_random_checkpoint(kEveryRole, c.path(), testing::random_options(22));
  const auto bytes = testing::read_bytes(a / "model.safetensors");
  EXPECT_EQ(bytes, testing::read_bytes(b / "model.safetensors"));
  EXPECT_NE(bytes, testing::read_bytes(c / "model.safetensors"));
  EXPECT_EQ(testing::read_bytes(a / "engram_map.safetensors"),
            testing::read_bytes(b / "engram_map.safetensors"));
  EXPECT_EQ(testing::read_text(a / "config.json"),
            testing::read_text(kEveryRole));  // copied verbatim
}

class EveryRoleWeights : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    write_random_checkpoint(kEveryRole, dir_->path(), testing::random_options(23));
    ckpt_ = Checkpoint::open(dir_->path()).release();
  }
  static void TearDownTestSuite() {
    delete ckpt_;
    delete dir_;
  }
  static TempDir* dir_;
  static Checkpoint* ckpt_;
};
TempDir* EveryRoleWeights::dir_ = nullptr;
Checkpoint* EveryRoleWeights::ckpt_ = nullptr;

TEST_F(EveryRoleWeights, EveryTensorIsFinite) {
  for (const std::string& name : ckpt_->tensor_names()) {
    if (name.ends_with(".scale") && ckpt_->tensor(name).dtype == DType::F8_E8M0) continue;
    for (float x : dequantize_tensor(*ckpt_, name)) ASSERT_TRUE(std::isfinite(x)) << name;
  }
}

TEST_F(EveryRoleWeights, ScalesFollowTheRules) {
  // Linear weights ~ N(0, 1/in): the quantised RMS stays within a few percent of 1/sqrt(in).
  for (const char* name :
       {"layers.2.attn.wq_b.weight", "layers.9.ffn.shared_experts.w2.weight",
        "layers.4.ffn.experts.5.w1.weight", "head.weight", "layers.8.attn.compressor.wkv.weight"}) {
    const auto w = dequantize_tensor(*ckpt_, name);
    const auto [rows, cols] = logical_matrix_shape(ckpt_->tensor(name));
    EXPECT_NEAR(rms(w) * std::sqrt(static_cast<double>(cols)), 1.0, 0.08) << name;
    EXPECT_NEAR(mean(w) * std::sqrt(static_cast<double>(cols)), 0.0, 0.05) << name;
  }
  EXPECT_NEAR(rms(dequantize_tensor(*ckpt_, "embed.weight")), 1.0, 0.03);
  EXPECT_NEAR(rms(dequantize_tensor(*ckpt_, "layers.5.engram.embed.weight")), 1.0, 0.05);
  const auto norm = dequantize_tensor(*ckpt_, "layers.3.attn.kv_norm.weight");
  EXPECT_NEAR(mean(norm), 1.0, 0.01);
  EXPECT_LT(rms(norm) - 1.0, 0.01);
  EXPECT_NEAR(rms(dequantize_tensor(*ckpt_, "layers.6.attn.attn_sink")), 1.0, 0.9);  // 4 draws
  EXPECT_LT(rms(dequantize_tensor(*ckpt_, "layers.6.ffn.gate.bias")), 0.05);
  const auto scale = dequantize_tensor(*ckpt_, "layers.6.hc_ffn_scale");
  for (float s : scale) EXPECT_NEAR(s, 1.0, 0.3);
  // mHC base: pre/post entries near 0, the combination matrix 2 on its diagonal.
  const auto base = dequantize_tensor(*ckpt_, "layers.7.hc_attn_base");
  ASSERT_EQ(base.size(), 24u);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(base[i], 0.0, 0.5);
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(base[8 + 4 * j + k], j == k ? 2.0 : 0.0, 0.5);
}

TEST_F(EveryRoleWeights, Fp8TilesUseTheCeilPowerOfTwoScale) {
  // amax/scale must land in (224, 448]: the scale is the smallest power of two fitting 448.
  const TensorView w = ckpt_->tensor("layers.2.attn.wo_b.weight");  // [256, 128]
  const TensorView s = ckpt_->tensor("layers.2.attn.wo_b.scale");   // [8, 4]
  ASSERT_EQ(s.dim(0), 8);
  ASSERT_EQ(s.dim(1), 4);
  for (int64_t tr = 0; tr < 8; ++tr)
    for (int64_t tc = 0; tc < 4; ++tc) {
      float amax = 0;
      for (int64_t r = tr * 32; r < tr * 32 + 32; ++r)
        for (int64_t c = tc * 32; c < tc * 32 + 32; ++c)
          amax = std::max(amax, std::fabs(e4m3_to_f32(w.data[r * 128 + c])));
      EXPECT_GT(amax, 224.0f);
      EXPECT_LE(amax, 448.0f);
    }
  // Packed FP4 experts: amax/scale lies in (3, 6], so each block's largest code is 3, 4 or 6.
  const TensorView e = ckpt_->tensor("layers.0.ffn.experts.0.w3.weight");  // [64, 128] bytes
  for (int64_t b = 0; b < 64 * 256 / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 16; ++i) {
      const uint8_t byte = e.data[b * 16 + i];
      amax = std::max(
          {amax, std::fabs(e2m1_to_f32(e2m1_low(byte))), std::fabs(e2m1_to_f32(e2m1_high(byte)))});
    }
    EXPECT_GE(amax, 3.0f) << "block " << b;
  }
}

TEST_F(EveryRoleWeights, LinearLayersKeepActivationsOrderOne) {
  // A unit-RMS input through wq_a then wq_b keeps unit RMS: the weights are sized for it.
  const auto wq_a = dequantize_tensor(*ckpt_, "layers.2.attn.wq_a.weight");  // [128, 256]
  const auto wq_b = dequantize_tensor(*ckpt_, "layers.2.attn.wq_b.weight");  // [512, 128]
  SplitMix64 rng(7);
  std::vector<double> x(256), h(128, 0.0), y(512, 0.0);
  for (size_t i = 0; i < x.size(); i += 2) rng.normal_pair(x[i], x[i + 1]);
  for (int o = 0; o < 128; ++o)
    for (int i = 0; i < 256; ++i) h[o] += wq_a[o * 256 + i] * x[i];
  for (int o = 0; o < 512; ++o)
    for (int i = 0; i < 128; ++i) y[o] += wq_b[o * 128 + i] * h[i];
  double ss = 0;
  for (double v : y) ss += v * v;
  EXPECT_NEAR(std::sqrt(ss / 512), 1.0, 0.35);
}

TEST(RandomCheckpoint, EngramTokenMap) {
  const auto map = random_engram_token_map(512, 400, 5);
  ASSERT_EQ(map.size(), 512u);
  int64_t next = 0;
  std::set<int64_t> seen;
  for (int64_t id : map) {
    ASSERT_LE(id, next);
    if (id == next) ++next;
    seen.insert(id);
  }
  EXPECT_EQ(next, 400);
  EXPECT_EQ(seen.size(), 400u);
  EXPECT_EQ(random_engram_token_map(512, 400, 5), map);
  EXPECT_NE(random_engram_token_map(512, 400, 6), map);
  const auto identity = random_engram_token_map(10, 10, 1);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(identity[i], i);
}

TEST(RandomCheckpoint, RewritingReplacesTheOtherLayout) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(1, 4 << 20));
  testing::write_text(dir / "notes.txt", "keep me");
  const auto summary = write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(1));
  EXPECT_EQ(summary.files, (std::vector<std::string>{"model.safetensors", "engram_map.safetensors",
                                                     "config.json"}));
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"model.safetensors", "engram_map.safetensors",
                                          "config.json", "notes.txt"}));
  EXPECT_NO_THROW(Checkpoint::open(dir.path()));
}

}  // namespace
}  // namespace flashdesk
