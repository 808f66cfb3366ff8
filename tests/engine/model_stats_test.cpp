// Parameter counts, bytes by dtype and KV bytes per token, against hand arithmetic.
#include <gtest/gtest.h>

#include "engine/checkpoint/model_stats.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

ModelConfig full_size() {
  return load_model_config(testing::config_asset("deepseek-v4.1-flash.json").string());
}

TEST(KvBytes, FullSizeIs890PerToken) {
  // docs/model-spec.md §6.3: 3 x (288 + 68) / 2 + (288 + 68) / 1.
  const KvBytesPerToken kv = kv_bytes_per_token(full_size());
  EXPECT_DOUBLE_EQ(kv.total(), 890.0);
  EXPECT_DOUBLE_EQ(kv.main, 720.0);
  EXPECT_DOUBLE_EQ(kv.index, 170.0);
  EXPECT_DOUBLE_EQ(kv.encoder, 534.0);
  EXPECT_DOUBLE_EQ(kv.decoder, 356.0);
  EXPECT_EQ(kv.window_bytes_per_entry, 528);
  EXPECT_EQ(kv.window_bytes_per_sequence, 40u * 128u * 528u);
}

TEST(KvBytes, EveryRoleConfigByHand) {
  // head_dim 128: 64 + 8 = 72 B; index_head_dim 64: 32 + 2 = 34 B; sources 2, 5 (ratio 2), 8 (1).
  const KvBytesPerToken kv =
      kv_bytes_per_token(load_model_config(testing::config_asset("test-every-role.json").string()));
  EXPECT_DOUBLE_EQ(kv.total(), 106.0 / 2 * 2 + 106.0);
  EXPECT_DOUBLE_EQ(kv.decoder, 106.0);
  EXPECT_EQ(kv.window_bytes_per_sequence, 14u * 16u * 132u);
}

TEST(ParameterCounts, FullSizeByHand) {
  const ParameterCounts p = count_parameters(full_size());
  // Engram tables: (384006168 + 384016682) rows x 256.
  EXPECT_EQ(p.engram_tables, (384006168LL + 384016682LL) * 256);
  // + per Engram layer wkv 25600 x 6144 and q/k 2 x 4 x 5120.
  EXPECT_EQ(p.engram, p.engram_tables + 2 * (25600LL * 6144 + 2 * 4 * 5120));
  // Routed experts dominate the backbone: 40 layers x 384 x 3 x 2304 x 5120.
  const int64_t experts = 40LL * 384 * 3 * 2304 * 5120;
  EXPECT_GT(p.backbone, experts);
  EXPECT_LT(p.backbone, experts + 10'000'000'000LL);
  EXPECT_EQ(p.total, p.backbone + p.engram + p.vision + p.dspark);
  // The technical report: 552B backbone, 196B Engram, ~8B active per prefill token, ~16B per
  // decode token (rounded figures).
  EXPECT_NEAR(static_cast<double>(p.backbone) / 1e9, 552, 1.0);
  EXPECT_NEAR(static_cast<double>(p.engram) / 1e9, 196.5, 1.0);
  EXPECT_NEAR(static_cast<double>(p.active_prefill) / 1e9, 8, 0.5);
  EXPECT_NEAR(static_cast<double>(p.active_decode) / 1e9, 16, 0.5);
}

TEST(ParameterCounts, ActiveDecodeCountsTopKExpertsAndHead) {
  ModelConfig c = load_model_config(testing::config_asset("test-every-role.json").string());
  const ParameterCounts p = count_parameters(c);
  c.text.num_experts_per_tok = 3;  // one more expert per token per layer
  const ParameterCounts q = count_parameters(c);
  const int64_t per_expert = 3 * 64 * 256;  // w1, w2, w3 of 64 x 256
  EXPECT_EQ(q.active_decode - p.active_decode, 14 * per_expert);
  EXPECT_EQ(q.active_prefill - p.active_prefill, 8 * per_expert);  // encoder layers 0-7
  EXPECT_EQ(q.total, p.total);
}

TEST(BytesByDtype, SumsEveryTensor) {
  const std::vector<TensorSpec> specs = {
      {"a", DType::BF16, {3, 4}}, {"b", DType::BF16, {2}}, {"c", DType::I8, {5, 2}}};
  const auto totals = bytes_by_dtype(specs);
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals[0].dtype, DType::I8);
  EXPECT_EQ(totals[0].bytes, 10u);
  EXPECT_EQ(totals[1].dtype, DType::BF16);
  EXPECT_EQ(totals[1].tensors, 2);
  EXPECT_EQ(totals[1].bytes, 28u);
}

}  // namespace
}  // namespace flashdesk
