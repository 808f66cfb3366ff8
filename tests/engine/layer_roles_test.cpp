// Layer roles derived from the config, checked against the full-size table of docs/model-spec.md
// §1.2 and a hand-worked table for the every-role test config.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/checkpoint/config.h"
#include "engine/util/error.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

struct Expected {
  AttnRole role;
  int64_t kv, index, candidate;
};

constexpr auto W = AttnRole::WindowOnly;
constexpr auto F = AttnRole::Full;
constexpr auto X = AttnRole::Reindex;
constexpr auto R = AttnRole::Reuse;

// Each layer's role and sources as `want` lists them, Engram on the layers `engram` names, the
// decoder from layer `decoder_from` on, the candidate blocks built by layer `builds_at`. The caller
// has asserted that there are as many roles as `want` (a test stops there otherwise).
void expect_roles(const std::vector<LayerRole>& roles, const std::vector<Expected>& want,
                  const std::function<bool(size_t)>& engram, size_t decoder_from,
                  size_t builds_at) {
  for (size_t l = 0; l < want.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_EQ(roles[l].role, want[l].role);
    EXPECT_EQ(roles[l].kv_source, want[l].kv);
    EXPECT_EQ(roles[l].index_source, want[l].index);
    EXPECT_EQ(roles[l].candidate_source, want[l].candidate);
    EXPECT_EQ(roles[l].engram, engram(l));
    EXPECT_EQ(roles[l].decoder, l >= decoder_from);
    EXPECT_EQ(roles[l].builds_candidates, l == builds_at);
  }
}

TEST(LayerRoles, FullSizeMatchesModelMd) {
  const ModelConfig c =
      load_model_config(testing::config_asset("deepseek-v4.1-flash.json").string());
  const auto roles = derive_layer_roles(c.text);
  ASSERT_EQ(roles.size(), 40u);
  for (const LayerRole& r : roles) {
    const int64_t l = r.layer;
    SCOPED_TRACE("layer " + std::to_string(l));
    if (l < 2) {  // 0, 1: sliding window only
      EXPECT_EQ(r.role, W);
      EXPECT_EQ(r.compress_ratio, 0);
      EXPECT_EQ(r.kv_source, -1);
    } else if (l < 20) {  // 2, 8, 14 Full; the rest of each group of 6 Reuse
      const int64_t group_source = 2 + (l - 2) / 6 * 6;
      EXPECT_EQ(r.compress_ratio, 2);
      EXPECT_EQ(r.role, l == group_source ? F : R);
      EXPECT_EQ(r.kv_source, group_source);
      EXPECT_EQ(r.index_source, group_source);
      EXPECT_EQ(r.candidate_source, -1);
    } else {  // 20 Full + candidates; 24, 28, 32, 36 Reindex; others Reuse of the group head
      const int64_t group_head = 20 + (l - 20) / 4 * 4;
      EXPECT_EQ(r.compress_ratio, 1);
      EXPECT_EQ(r.role, l == 20 ? F : l == group_head ? X : R);
      EXPECT_EQ(r.kv_source, 20);
      EXPECT_EQ(r.index_source, group_head);
      EXPECT_EQ(r.candidate_source, l != 20 && l == group_head ? 20 : -1);
    }
    EXPECT_EQ(r.builds_candidates, l == 20);
    EXPECT_EQ(r.engram, l == 1 || l == 14);
    EXPECT_EQ(r.decoder, l >= 20);
  }
  EXPECT_EQ(decoder_first_layer(c.text), 20);
}

TEST(LayerRoles, EveryRoleConfigByHand) {
  const ModelConfig c = load_model_config(testing::config_asset("test-every-role.json").string());
  // ratios [0,0,2,2,2,2,2,2,1,1,1,1,1,1], kv [2,5,8], index [2,5,8,10,12], candidates from 8.
  const std::vector<Expected> want = {
      {W, -1, -1, -1}, {W, -1, -1, -1}, {F, 2, 2, -1}, {R, 2, 2, -1}, {R, 2, 2, -1},
      {F, 5, 5, -1},   {R, 5, 5, -1},   {R, 5, 5, -1}, {F, 8, 8, -1}, {R, 8, 8, -1},
      {X, 8, 10, 8},   {R, 8, 10, -1},  {X, 8, 12, 8}, {R, 8, 12, -1}};
  const auto roles = derive_layer_roles(c.text);
  ASSERT_EQ(roles.size(), want.size());
  expect_roles(
      roles, want, [](size_t l) { return l == 1 || l == 5; }, 8, 8);
  for (size_t l = 0; l < roles.size(); ++l) EXPECT_EQ(roles[l].layer, static_cast<int64_t>(l));
}

// tools/configs/roles_config.py: V4.1-Flash's dimensions over eight layers, one of each role of
// the full-size table (the benchmarks' whole model where 43 layers do not fit).
TEST(LayerRoles, RolesConfigHasEveryFullSizeRoleAtFullSizeShapes) {
  const ModelConfig full =
      load_model_config(testing::config_asset("deepseek-v4.1-flash.json").string());
  const ModelConfig c =
      load_model_config(testing::config_asset("deepseek-v4.1-flash-roles.json").string());
  const std::vector<Expected> want = {{W, -1, -1, -1}, {W, -1, -1, -1}, {F, 2, 2, -1},
                                      {R, 2, 2, -1},   {F, 4, 4, -1},   {R, 4, 4, -1},
                                      {X, 4, 6, 4},    {R, 4, 6, -1}};
  const auto roles = derive_layer_roles(c.text);
  ASSERT_EQ(roles.size(), want.size());
  expect_roles(
      roles, want, [](size_t l) { return l == 1 || l == 2; }, 4, 4);
  // The compress ratios of the full-size roles: window-only, 2 and 1 (candidates on ratio 1).
  EXPECT_EQ(roles[2].compress_ratio, 2);
  EXPECT_EQ(roles[4].compress_ratio, 1);
  const TextConfig &a = c.text, &b = full.text;
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.q_lora_rank, b.q_lora_rank);
  EXPECT_EQ(a.o_groups, b.o_groups);
  EXPECT_EQ(a.n_routed_experts, b.n_routed_experts);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.index_topk, b.index_topk);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.engram_head_dim, b.engram_head_dim);
  EXPECT_LT(a.engram_num_embeddings[0], b.engram_num_embeddings[0] / 100);  // small tables
}

TEST(LayerRoles, NoDecoderWhenEngramOrAnotherSourceFollows) {
  ModelConfig c = load_model_config(testing::config_asset("test-every-role.json").string());
  c.text.engram_layer_ids = {1, 9};
  EXPECT_EQ(decoder_first_layer(c.text), 14);  // Engram inside the would-be decoder
  c.text.engram_layer_ids = {};
  c.text.compress_ratios[13] = 2;  // layer 13 no longer reads layer 8's KV
  EXPECT_EQ(decoder_first_layer(c.text), 14);
  c.text.kv_source_layer_ids = {};
  EXPECT_EQ(decoder_first_layer(c.text), 14);
}

TEST(LayerRoles, IndexSourceMustReadTheSameKv) {
  ModelConfig c = load_model_config(testing::config_asset("test-every-role.json").string());
  // Layer 5 becomes Reuse of the ratio-2 group of layer 2; layer 8 (ratio 1) then has no index
  // source of its own group if 8 stops being one: its nearest index source 5 indexes other KV.
  c.text.kv_source_layer_ids = {2, 5, 8};
  c.text.index_source_layer_ids = {2, 5, 8, 10, 12};
  c.text.compress_ratios[9] = 2;  // layer 9: ratio 2 but its nearest index source is 8 (ratio 1)
  try {
    derive_layer_roles(c.text);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 9 reads the KV of layer 5"), std::string::npos)
        << e.what();
  }
}

TEST(LayerRoles, RoleNames) {
  EXPECT_EQ(attn_role_name(AttnRole::WindowOnly), "window-only");
  EXPECT_EQ(attn_role_name(AttnRole::Full), "Full");
  EXPECT_EQ(attn_role_name(AttnRole::Reindex), "Reindex");
  EXPECT_EQ(attn_role_name(AttnRole::Reuse), "Reuse");
}

}  // namespace
}  // namespace flashdesk
