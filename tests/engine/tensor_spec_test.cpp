// expected_tensors() against docs/model-spec.md §2.4 (full size, values copied by hand from the
// reference) and the published checkpoint's tensor count and size (§2.1).
#include <gtest/gtest.h>

#include <map>

#include "engine/checkpoint/engram_primes.h"
#include "engine/checkpoint/tensor_spec.h"
#include "engine/util/error.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

using Shape = std::vector<int64_t>;

class FullSizeSpecs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    config_ = new ModelConfig(
        load_model_config(testing::config_asset("deepseek-v4.1-flash.json").string()));
    specs_ = new std::map<std::string, TensorSpec>();
    list_ = new std::vector<TensorSpec>(expected_tensors(*config_));
    for (const TensorSpec& s : *list_) specs_->emplace(s.name, s);
  }
  static void TearDownTestSuite() {
    delete config_;
    delete specs_;
    delete list_;
  }
  void expect(const std::string& name, DType dtype, const Shape& shape) {
    const auto it = specs_->find(name);
    ASSERT_NE(it, specs_->end()) << name;
    EXPECT_EQ(it->second.dtype, dtype) << name;
    EXPECT_EQ(it->second.shape, shape) << name;
  }
  void expect_fp8(const std::string& module, int64_t out, int64_t in) {
    expect(module + ".weight", DType::F8_E4M3, {out, in});
    expect(module + ".scale", DType::F8_E8M0, {(out + 31) / 32, (in + 31) / 32});
  }
  bool has(const std::string& name) { return specs_->contains(name); }

  static ModelConfig* config_;
  static std::map<std::string, TensorSpec>* specs_;
  static std::vector<TensorSpec>* list_;
};
ModelConfig* FullSizeSpecs::config_ = nullptr;
std::map<std::string, TensorSpec>* FullSizeSpecs::specs_ = nullptr;
std::vector<TensorSpec>* FullSizeSpecs::list_ = nullptr;

TEST_F(FullSizeSpecs, EveryLayer) {
  for (int l : {0, 5, 20, 39}) {
    const std::string p = "layers." + std::to_string(l) + ".";
    expect(p + "attn_norm.weight", DType::BF16, {5120});
    expect(p + "ffn_norm.weight", DType::BF16, {5120});
    expect(p + "hc_attn_fn", DType::F32, {24, 20480});
    expect(p + "hc_attn_base", DType::F32, {24});
    expect(p + "hc_attn_scale", DType::F32, {3});
    expect(p + "hc_ffn_fn", DType::F32, {24, 20480});
    expect_fp8(p + "attn.wq_a", 1280, 5120);
    expect(p + "attn.q_norm.weight", DType::BF16, {1280});
    expect_fp8(p + "attn.wq_b", 32768, 1280);
    expect_fp8(p + "attn.wkv", 512, 5120);
    expect(p + "attn.kv_norm.weight", DType::BF16, {512});
    expect_fp8(p + "attn.wo_a", 8192, 4096);
    expect_fp8(p + "attn.wo_b", 5120, 8192);
    expect(p + "attn.attn_sink", DType::F32, {64});
    expect(p + "ffn.gate.weight", DType::BF16, {384, 5120});
    expect(p + "ffn.gate.bias", DType::F32, {384});
    expect(p + "ffn.gate.bias_vl", DType::F32, {384});
    expect_fp8(p + "ffn.shared_experts.w1", 2304, 5120);
    expect_fp8(p + "ffn.shared_experts.w2", 5120, 2304);
    expect_fp8(p + "ffn.shared_experts.w3", 2304, 5120);
    for (int e : {0, 383}) {
      const std::string x = p + "ffn.experts." + std::to_string(e) + ".";
      expect(x + "w1.weight", DType::I8, {2304, 2560});
      expect(x + "w1.scale", DType::F8_E8M0, {2304, 160});
      expect(x + "w3.weight", DType::I8, {2304, 2560});
      expect(x + "w2.weight", DType::I8, {5120, 1152});
      expect(x + "w2.scale", DType::F8_E8M0, {5120, 72});
    }
    EXPECT_FALSE(has(p + "ffn.experts.384.w1.weight"));
    EXPECT_FALSE(has(p + "attn.compressor.ape"));  // no ape in V4.1
  }
}

TEST_F(FullSizeSpecs, SourcesOwnCompressorsAndIndexers) {
  for (int l = 0; l < 40; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const bool kv = l == 2 || l == 8 || l == 14 || l == 20;
    const bool index = kv || l == 24 || l == 28 || l == 32 || l == 36;
    SCOPED_TRACE(p);
    EXPECT_EQ(has(p + "attn.compressor.wkv.weight"), kv);
    EXPECT_EQ(has(p + "attn.compressor.wgate.weight"), kv && l != 20);  // ratio > 1 only
    EXPECT_EQ(has(p + "attn.indexer.wk.weight"), kv);
    EXPECT_EQ(has(p + "attn.indexer.wq_b.weight"), index);
    EXPECT_EQ(has(p + "attn.indexer.weights_proj.weight"), index);
    EXPECT_EQ(has(p + "engram.wkv.weight"), l == 1 || l == 14);
  }
  expect("layers.2.attn.compressor.wkv.weight", DType::BF16, {512, 5120});
  expect("layers.2.attn.compressor.wgate.weight", DType::BF16, {512, 5120});
  expect("layers.20.attn.compressor.norm.weight", DType::BF16, {512});
  expect("layers.20.attn.indexer.wk.weight", DType::BF16, {128, 512});
  expect("layers.20.attn.indexer.k_norm.weight", DType::BF16, {128});
  expect_fp8("layers.24.attn.indexer.wq_b", 4096, 1280);
  expect("layers.24.attn.indexer.weights_proj.weight", DType::BF16, {32, 5120});
}

TEST_F(FullSizeSpecs, EngramTopLevelVisionAndDspark) {
  expect("layers.1.engram.embed.weight", DType::F8_E4M3, {384006168, 256});
  expect("layers.1.engram.embed.scale", DType::F8_E8M0, {384006168, 8});
  expect("layers.14.engram.embed.weight", DType::F8_E4M3, {384016682, 256});
  expect_fp8("layers.14.engram.wkv", 25600, 6144);
  expect("layers.14.engram.q_weight", DType::BF16, {4, 5120});
  expect("layers.14.engram.k_weight", DType::BF16, {4, 5120});
  expect("embed.weight", DType::BF16, {129280, 5120});
  expect("head.weight", DType::BF16, {129280, 5120});
  expect("norm.weight", DType::BF16, {5120});
  EXPECT_FALSE(has("hc_head_fn"));
  expect("vision.patch_embed.proj.weight", DType::BF16, {1024, 588});
  expect("vision.blocks.31.attn.wqkv.weight", DType::BF16, {3072, 1024});
  expect("vision.blocks.0.mlp.w1.weight", DType::BF16, {5632, 1024});
  expect("vision.blocks.0.mlp.w2.weight", DType::BF16, {1024, 2816});
  expect("aligner.w1.weight", DType::BF16, {5120, 9216});
  expect("aligner.w2.weight", DType::BF16, {5120, 5120});
  expect("image_newline", DType::BF16, {5120});
  expect_fp8("mtp.0.main_proj", 5120, 15360);
  expect("mtp.0.main_norm.weight", DType::BF16, {5120});
  EXPECT_FALSE(has("mtp.1.main_proj.weight"));
  expect("mtp.1.ffn.gate.weight", DType::BF16, {128, 5120});
  expect("mtp.1.ffn.experts.127.w2.weight", DType::I8, {5120, 1152});
  EXPECT_FALSE(has("mtp.1.ffn.experts.128.w2.weight"));
  EXPECT_FALSE(has("mtp.0.attn.compressor.wkv.weight"));  // window-only stages
  expect("mtp.2.norm.weight", DType::BF16, {5120});
  expect("mtp.2.markov_head.embed.weight", DType::BF16, {129280, 256});
  expect("mtp.2.markov_head.head.weight", DType::BF16, {129280, 256});
  expect("mtp.2.confidence_head.proj.weight", DType::BF16, {1, 5376});
}

TEST_F(FullSizeSpecs, MatchesThePublishedCheckpointCountAndSize) {
  // docs/model-spec.md §2.1: 96,085 tensors, 475.3 GiB (data plus 48 shard headers).
  EXPECT_EQ(list_->size(), 96085u);
  uint64_t bytes = 0;
  for (const TensorSpec& s : *list_) bytes += s.nbytes();
  const double gib = static_cast<double>(bytes) / (1u << 30);
  EXPECT_GT(gib, 475.2);
  EXPECT_LT(gib, 475.35);
  EXPECT_EQ(specs_->size(), list_->size());  // names are unique
}

TEST(TensorSpec, PartialClosureAddsSources) {
  const ModelConfig c =
      load_model_config(testing::config_asset("deepseek-v4.1-flash.json").string());
  EXPECT_EQ(partial_layer_closure(c, {20}), (std::vector<int64_t>{20}));
  EXPECT_EQ(partial_layer_closure(c, {25}), (std::vector<int64_t>{20, 24, 25}));
  EXPECT_EQ(partial_layer_closure(c, {3, 0}), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_THROW(partial_layer_closure(c, {40}), InvalidRequest);
  const auto specs = expected_partial_tensors(c, {20});
  std::map<std::string, DType> names;
  for (const auto& s : specs) names.emplace(s.name, s.dtype);
  EXPECT_TRUE(names.contains("embed.weight"));
  EXPECT_TRUE(names.contains("head.weight"));
  EXPECT_TRUE(names.contains("layers.20.ffn.experts.383.w3.scale"));
  EXPECT_FALSE(names.contains("layers.21.attn_norm.weight"));
  EXPECT_FALSE(names.contains("vision.norm.weight"));
  EXPECT_FALSE(names.contains("mtp.0.main_norm.weight"));
  EXPECT_EQ(main_layer_of("layers.17.ffn.gate.bias"), 17);
  EXPECT_EQ(main_layer_of("layers.x.ffn"), -1);
  EXPECT_EQ(main_layer_of("mtp.0.attn_norm.weight"), -1);
}

TEST(TensorSpec, ParametersCountPackedPairsAndNoScales) {
  EXPECT_EQ((TensorSpec{"w", DType::I8, {4, 16}}).parameters(), 128);
  EXPECT_EQ((TensorSpec{"s", DType::F8_E8M0, {4, 1}}).parameters(), 0);
  EXPECT_EQ((TensorSpec{"b", DType::BF16, {3, 5}}).nbytes(), 30u);
}

TEST(EngramPrimes, PrimalityAndTheDraw) {
  for (uint64_t p : {2ull, 3ull, 1009ull, 1013ull, 16000057ull, 2305843009213693951ull})
    EXPECT_TRUE(is_prime(p)) << p;
  for (uint64_t n : {0ull, 1ull, 1001ull, 1011ull, 3215031751ull, 2305843009213693953ull})
    EXPECT_FALSE(is_prime(n)) << n;
  const ModelConfig c = load_model_config(testing::config_asset("test-every-role.json").string());
  // Primes >= 1000 in order: 1009 1013 1019 1021 1031 1033 | 1039 1049 1051 1061 1063 1069.
  const auto primes = engram_primes(c.text);
  ASSERT_EQ(primes.size(), 2u);
  EXPECT_EQ(primes[0], (std::vector<int64_t>{1009, 1013, 1019, 1021, 1031, 1033}));
  EXPECT_EQ(primes[1], (std::vector<int64_t>{1039, 1049, 1051, 1061, 1063, 1069}));
}

TEST(EngramPrimes, FullSizeSumsMatchThePublishedRows) {
  const ModelConfig c =
      load_model_config(testing::config_asset("deepseek-v4.1-flash.json").string());
  const auto primes = engram_primes(c.text);
  ASSERT_EQ(primes.size(), 2u);
  ASSERT_EQ(primes[0].size(), 24u);
  int64_t sum0 = 0, sum1 = 0;
  for (int64_t p : primes[0]) sum0 += p;
  for (int64_t p : primes[1]) sum1 += p;
  EXPECT_EQ(sum0, 384006168);
  EXPECT_EQ(sum1, 384016682);
  EXPECT_GE(primes[0][0], 16000000);
}

}  // namespace
}  // namespace flashdesk
