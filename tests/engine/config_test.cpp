// config.json parsing: the V4.1 nested form, the official ModelArgs defaults, and typed errors
// naming the field and saying which values are defaults.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/config.h"
#include "engine/util/error.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

using nlohmann::json;

json every_role_json() {
  return json::parse(testing::read_text(testing::config_asset("test-every-role.json")));
}

// Expects a FormatError whose message names `file` and contains every one of `parts`.
void expect_format_error(const std::string& text, std::initializer_list<std::string> parts) {
  try {
    parse_model_config(text, "my/config.json");
    FAIL() << "expected FormatError for " << text.substr(0, 200);
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.file(), "my/config.json");
    EXPECT_NE(msg.find("my/config.json"), std::string::npos) << msg;
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

void expect_text_field_error(const char* key, const json& value,
                             std::initializer_list<std::string> parts) {
  json j = every_role_json();
  j["text_config"][key] = value;
  expect_format_error(j.dump(), parts);
}

TEST(Config, ParsesFullSizeAsset) {
  const ModelConfig c =
      load_model_config(testing::config_asset("deepseek-v4.1-flash.json").string());
  const TextConfig& t = c.text;
  EXPECT_EQ(c.name, "deepseek-v4.1-flash");
  EXPECT_EQ(c.image_token_id, 129264);
  EXPECT_EQ(t.vocab_size, 129280);
  EXPECT_EQ(t.hidden_size, 5120);
  EXPECT_EQ(t.num_hidden_layers, 40);
  EXPECT_EQ(t.q_lora_rank, 1280);
  EXPECT_EQ(t.moe_intermediate_size, 2304);
  EXPECT_DOUBLE_EQ(t.rms_norm_eps, 1e-20);
  EXPECT_EQ(t.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(t.rope_scaling.factor, 16.0);
  EXPECT_EQ(t.rope_scaling.original_max_position, 65536);
  EXPECT_EQ(t.compress_ratios.size(), 43u);
  EXPECT_EQ(t.candidate_source_layer_id, std::optional<int64_t>(20));
  EXPECT_EQ(t.engram_num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(t.dspark_target_layer_ids, (std::vector<int64_t>{37, 38, 39}));
  ASSERT_TRUE(c.vision.has_value());
  EXPECT_EQ(c.vision->intermediate_size, 2816);
  EXPECT_EQ(c.vision->min_pixels, 295936);
  EXPECT_FALSE(c.vision->max_wh_ratio.has_value());
  EXPECT_EQ(c.quant.weight_block_size[0], 32);
  EXPECT_EQ(c.quant.expert_dtype, "fp4");
}

TEST(Config, AbsentFieldsTakeTheOfficialModelArgsDefaults) {
  // The official ModelArgs defaults (model.py, dba1be0a): a small model with the optional parts
  // off, not the published full-size config.
  const ModelConfig d = parse_model_config(R"({"text_config": {}})", "c.json");
  const TextConfig& t = d.text;
  EXPECT_EQ(t.vocab_size, 129280);
  EXPECT_EQ(t.hidden_size, 1024);
  EXPECT_EQ(t.num_hidden_layers, 5);
  EXPECT_EQ(t.num_attention_heads, 16);
  EXPECT_EQ(t.head_dim, 128);
  EXPECT_EQ(t.qk_rope_head_dim, 32);
  EXPECT_EQ(t.q_lora_rank, 256);
  EXPECT_EQ(t.moe_intermediate_size, 1024);
  EXPECT_EQ(t.n_routed_experts, 8);
  EXPECT_EQ(t.num_experts_per_tok, 2);
  EXPECT_DOUBLE_EQ(t.routed_scaling_factor, 1.0);
  EXPECT_DOUBLE_EQ(t.swiglu_limit, 0.0);
  EXPECT_EQ(t.compress_ratios, (std::vector<int64_t>{0, 2, 2, 1, 1, 0}));
  EXPECT_EQ(t.kv_source_layer_ids, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(t.index_topk, 64);
  EXPECT_DOUBLE_EQ(t.compress_rope_theta, 40000.0);
  EXPECT_EQ(t.rope_scaling.original_max_position, 0);  // no YaRN
  EXPECT_FALSE(t.candidate_source_layer_id.has_value());
  EXPECT_TRUE(t.engram_layer_ids.empty());
  EXPECT_TRUE(t.engram_num_embeddings.empty());
  EXPECT_EQ(t.num_nextn_predict_layers, 1);
  EXPECT_EQ(dspark_stages(t), 0);  // dspark_block_size 0: no DSpark stages are built
  EXPECT_EQ(t.dspark_n_routed_experts, t.n_routed_experts);  // 0 means "the main layers' count"
  EXPECT_EQ(t.dspark_num_experts_per_tok, t.num_experts_per_tok);
  EXPECT_FALSE(d.vision.has_value());  // no vision_config: a text-only model
  EXPECT_EQ(d.quant.scale_fmt, "ue8m0");
  EXPECT_EQ(derive_layer_roles(t).size(), 5u);
}

TEST(Config, NoEngramFieldsMeansNoEngram) {
  json j = every_role_json();
  for (const char* key :
       {"engram_layer_ids", "engram_num_embeddings", "engram_max_ngram_size", "engram_vocab_size",
        "engram_n_heads", "engram_head_dim", "engram_pad_token_id", "engram_compressed_vocab_size"})
    j["text_config"].erase(key);
  const ModelConfig c = parse_model_config(j.dump(), "c");
  EXPECT_TRUE(c.text.engram_layer_ids.empty());
  for (const LayerRole& r : derive_layer_roles(c.text)) EXPECT_FALSE(r.engram) << r.layer;
}

TEST(Config, ErrorsSayWhichValuesAreDefaults) {
  // Engram layers written, their tables not: the error shows what the user wrote and says the
  // other side is a default.
  json j = every_role_json();
  j["text_config"].erase("engram_num_embeddings");
  expect_format_error(j.dump(), {"text_config.engram_num_embeddings", "has 0 entries",
                                 "engram_layer_ids [1, 5]", "not in the file"});
  j = every_role_json();
  j["text_config"].erase("engram_max_ngram_size");
  expect_format_error(j.dump(), {"engram_max_ngram_size: 1 is outside [2, 16]",
                                 "engram_max_ngram_size is not in the file"});
  // 12 layers written, compress_ratios left at the 6-entry default.
  expect_format_error(R"({"text_config": {"num_hidden_layers": 12}})",
                      {"compress_ratios: has 6 entries; expected 13", "num_hidden_layers 12 +",
                       "num_nextn_predict_layers 1 (its default", "compress_ratios is not in"});
  // A value the user wrote is quoted as written, with no default marker.
  json k = every_role_json();
  k["text_config"]["engram_max_ngram_size"] = 40;
  try {
    parse_model_config(k.dump(), "c");
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("engram_max_ngram_size: 40 is outside"),
              std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("not in the file"), std::string::npos) << e.what();
  }
  // Role errors name the default source lists they stem from.
  expect_format_error(
      R"({"text_config": {"num_hidden_layers": 3, "compress_ratios": [0, 0, 2, 0]}})",
      {"kv_source_layer_ids", "defaults in use", "kv_source_layer_ids [1, 3]"});
}

TEST(Config, CompressedVocabularyMayExceedVocabSize) {
  json j = every_role_json();  // vocab_size 512
  j["text_config"]["engram_compressed_vocab_size"] = 700;
  EXPECT_EQ(parse_model_config(j.dump(), "c").text.engram_compressed_vocab_size, 700);
  j["text_config"]["engram_compressed_vocab_size"] = 0;
  expect_format_error(j.dump(), {"engram_compressed_vocab_size: 0 is outside"});
}

TEST(Config, OfficialOffValuesTurnPartsOff) {
  json j = every_role_json();
  j["text_config"]["candidate_source_layer_id"] = -1;  // ModelArgs: < 0 turns candidates off
  j["text_config"].erase("candidate_topk_blocks");
  j["text_config"].erase("candidate_block_size");
  EXPECT_FALSE(parse_model_config(j.dump(), "c").text.candidate_source_layer_id.has_value());
  j = every_role_json();
  j["vision_config"] = json::object();  // vision_n_layers defaults to 0: vision disabled
  EXPECT_FALSE(parse_model_config(j.dump(), "c").vision.has_value());
  j["vision_config"] = {{"num_hidden_layers", 2}};
  EXPECT_TRUE(parse_model_config(j.dump(), "c").vision.has_value());
  j = every_role_json();
  j["text_config"].erase("rope_scaling");  // original_seq_len 0: no YaRN
  EXPECT_EQ(parse_model_config(j.dump(), "c").text.rope_scaling.original_max_position, 0);
}

TEST(Config, ParsesEveryRoleConfig) {
  const ModelConfig c = parse_model_config(every_role_json().dump(), "every.json");
  EXPECT_EQ(c.text.num_hidden_layers, 14);
  EXPECT_EQ(c.text.num_nextn_predict_layers, 0);
  EXPECT_EQ(c.text.engram_num_embeddings, (std::vector<int64_t>{6126, 6332}));
  EXPECT_EQ(c.text.candidate_source_layer_id, std::optional<int64_t>(8));
}

TEST(Config, RopeScalingAcceptsTypeOrRopeType) {
  json j = every_role_json();
  j["text_config"]["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}};
  EXPECT_DOUBLE_EQ(parse_model_config(j.dump(), "c").text.rope_scaling.factor, 4.0);
  j["text_config"]["rope_scaling"] = {{"type", "linear"}};
  expect_format_error(j.dump(), {"rope_scaling.rope_type", "linear"});
  j["text_config"]["rope_scaling"] = {{"type", "yarn"}, {"rope_type", "dynamic"}};
  expect_format_error(j.dump(), {"rope_scaling.type", "contradicts"});
}

TEST(Config, NullCandidateSourceMeansNone) {
  json j = every_role_json();
  j["text_config"]["candidate_source_layer_id"] = nullptr;
  EXPECT_FALSE(parse_model_config(j.dump(), "c").text.candidate_source_layer_id.has_value());
}

TEST(Config, InvalidJsonNamesFileAndOffset) {
  expect_format_error(R"({"text_config": {"hidden_size": 5120,}})", {"invalid JSON", "byte"});
  expect_format_error("", {"invalid JSON"});
  expect_format_error(std::string(1000, '[') + std::string(1000, ']'), {"nested deeper"});
  expect_format_error("[1, 2]", {"expected a JSON object"});
  expect_format_error(R"({"text_config": {"rope_theta": 5e555}})",
                      {"invalid JSON", "overflow"});  // fuzz find
}

TEST(Config, WrongTypesNameTheField) {
  expect_text_field_error("hidden_size", "5120",
                          {"text_config.hidden_size", "expected an integer"});
  expect_text_field_error("hidden_size", 5120.5, {"text_config.hidden_size", "non-integral"});
  expect_text_field_error("norm_topk_prob", 1, {"text_config.norm_topk_prob", "true or false"});
  expect_text_field_error("compress_ratios", json::array({0, "x"}),
                          {"text_config.compress_ratios[1]"});
  expect_text_field_error("rope_theta", "big", {"text_config.rope_theta", "number"});
  expect_text_field_error("scoring_func", 3, {"text_config.scoring_func", "string"});
  expect_format_error(R"({"text_config": 5})", {"text_config", "expected an object"});
  expect_format_error(R"({"vision_config": {}})", {"text_config: missing"});
  expect_format_error(R"({"text_config": {}, "vision_config": {"patch_size": "14"}})",
                      {"vision_config.patch_size"});
  expect_format_error(
      R"({"text_config": {}, "quantization_config": {"weight_block_size": [128, 128]}})",
      {"quantization_config.weight_block_size", "[128, 128]"});
}

TEST(Config, ContradictionsNameTheField) {
  expect_text_field_error("compress_ratios", json::array({0, 2}),
                          {"compress_ratios", "has 2 entries; expected 14"});
  expect_text_field_error("num_nextn_predict_layers", 1, {"compress_ratios", "expected 15"});
  expect_text_field_error("kv_source_layer_ids", json::array({2, 5, 14}),
                          {"kv_source_layer_ids[2]", "does not exist"});
  expect_text_field_error("kv_source_layer_ids", json::array({1, 5, 8}),
                          {"kv_source_layer_ids[0]", "ratio 0"});
  expect_text_field_error("kv_source_layer_ids", json::array({5, 2, 8}),
                          {"kv_source_layer_ids[1]", "increasing"});
  expect_text_field_error("kv_source_layer_ids", json::array({5, 8}),
                          {"kv_source_layer_ids", "layer 2", "no KV source"});
  expect_text_field_error("index_source_layer_ids", json::array({2, 8, 10, 12}),
                          {"index_source_layer_ids", "layer 5", "must also be an index source"});
  expect_text_field_error("candidate_source_layer_id", 10,
                          {"candidate_source_layer_id", "not a KV source"});
  expect_text_field_error("engram_num_embeddings", json::array({6126, 6333}),
                          {"engram_num_embeddings[1]", "6332", "prime"});
  expect_text_field_error("engram_num_embeddings", json::array({6126}),
                          {"engram_num_embeddings", "has 1 entries"});
  expect_text_field_error("hidden_size", 250, {"text_config.hidden_size", "multiple of 32"});
  expect_text_field_error("head_dim", 100, {"text_config.head_dim", "multiple of 32"});
  expect_text_field_error("moe_intermediate_size", 48, {"moe_intermediate_size", "multiple of 32"});
  expect_text_field_error("num_experts_per_tok", 9, {"num_experts_per_tok", "outside"});
  expect_text_field_error("o_groups", 3, {"o_groups", "does not divide"});
  expect_text_field_error("num_key_value_heads", 2, {"num_key_value_heads"});
  expect_text_field_error("engram_pad_token_id", -1, {"engram_pad_token_id", "-1 is outside"});
  expect_text_field_error("rms_norm_eps", 0, {"rms_norm_eps", "positive"});
  expect_text_field_error("num_hash_layers", 3, {"num_hash_layers", "V4"});
  expect_text_field_error("hidden_act", "gelu", {"hidden_act", "gelu"});
  json j = every_role_json();
  j["model_type"] = "deepseek_v4";
  expect_format_error(j.dump(), {"model_type", "deepseek_v4"});
  j = every_role_json();
  j["bos_token_id"] = 9999;
  expect_format_error(j.dump(), {"bos_token_id", "9999"});
}

TEST(Config, DsparkStagesMustBeWindowOnly) {
  json j = every_role_json();
  j["text_config"]["num_nextn_predict_layers"] = 1;
  j["text_config"]["dspark_block_size"] = 5;
  j["text_config"]["dspark_target_layer_ids"] = {11, 12, 13};
  j["text_config"]["dspark_noise_token_id"] = 7;
  auto ratios = j["text_config"]["compress_ratios"];
  ratios.push_back(1);
  j["text_config"]["compress_ratios"] = ratios;
  expect_format_error(j.dump(), {"compress_ratios[14]", "DSpark"});
  ratios.back() = 0;
  j["text_config"]["compress_ratios"] = ratios;
  EXPECT_EQ(dspark_stages(parse_model_config(j.dump(), "c").text), 1);
  j["text_config"]["dspark_target_layer_ids"] = {14};
  expect_format_error(j.dump(), {"dspark_target_layer_ids[0]"});
  j["text_config"].erase("dspark_block_size");  // block size 0: the stages are not built
  EXPECT_EQ(dspark_stages(parse_model_config(j.dump(), "c").text), 0);
}

TEST(Config, LoadMissingFileIsIoError) {
  EXPECT_THROW(load_model_config("/nonexistent/config.json"), IoError);
}

}  // namespace
}  // namespace flashdesk
