// config.json (V4.1 nested form) -> ModelConfig: field reads with the reference's defaults, then
// validation (config_validate.cpp) and role derivation (layer_roles.cpp).
#include "engine/checkpoint/config.h"

#include <filesystem>
#include <set>

#include "engine/checkpoint/config_validate.h"
#include "engine/checkpoint/json_fields.h"
#include "engine/util/error.h"
#include "engine/util/file_io.h"

namespace flashdesk {
namespace {

using nlohmann::json;

void read_rope_scaling(const JsonFields& parent, RopeScaling& rope) {
  const json* obj = parent.object("rope_scaling");
  if (obj == nullptr) return;
  const JsonFields f(*obj, parent.path("rope_scaling"), parent.file());
  // HF configs spell the kind `rope_type`; older ones `type`. Both present must agree.
  std::string by_rope_type, by_type;
  f.read("rope_type", by_rope_type);
  f.read("type", by_type);
  if (!by_rope_type.empty() && !by_type.empty() && by_rope_type != by_type)
    throw FormatError(parent.file(), f.path("type") + ": '" + by_type +
                                         "' contradicts rope_type '" + by_rope_type + "'");
  if (!by_rope_type.empty())
    rope.type = by_rope_type;
  else if (!by_type.empty())
    rope.type = by_type;
  f.read("factor", rope.factor);
  f.read("beta_fast", rope.beta_fast);
  f.read("beta_slow", rope.beta_slow);
  f.read("original_max_position_embeddings", rope.original_max_position);
}

void read_attention(const JsonFields& f, TextConfig& t) {
  f.read("num_attention_heads", t.num_attention_heads);
  f.read("num_key_value_heads", t.num_key_value_heads);
  f.read("head_dim", t.head_dim);
  f.read("qk_rope_head_dim", t.qk_rope_head_dim);
  f.read("q_lora_rank", t.q_lora_rank);
  f.read("o_lora_rank", t.o_lora_rank);
  f.read("o_groups", t.o_groups);
  f.read("max_position_embeddings", t.max_position_embeddings);
  f.read("rope_theta", t.rope_theta);
  read_rope_scaling(f, t.rope_scaling);
  f.read("sliding_window", t.sliding_window);
  f.read("compress_ratios", t.compress_ratios);
  f.read("compress_rope_theta", t.compress_rope_theta);
  f.read("kv_source_layer_ids", t.kv_source_layer_ids);
  f.read("index_source_layer_ids", t.index_source_layer_ids);
  f.read("index_n_heads", t.index_n_heads);
  f.read("index_head_dim", t.index_head_dim);
  f.read("index_topk", t.index_topk);
  f.read("candidate_source_layer_id", t.candidate_source_layer_id);
  f.read("candidate_topk_blocks", t.candidate_topk_blocks);
  f.read("candidate_block_size", t.candidate_block_size);
}

void read_moe(const JsonFields& f, TextConfig& t) {
  f.read("hidden_act", t.hidden_act);
  f.read("swiglu_limit", t.swiglu_limit);
  f.read("n_routed_experts", t.n_routed_experts);
  f.read("n_shared_experts", t.n_shared_experts);
  f.read("num_experts_per_tok", t.num_experts_per_tok);
  f.read("moe_intermediate_size", t.moe_intermediate_size);
  f.read("scoring_func", t.scoring_func);
  f.read("topk_method", t.topk_method);
  f.read("norm_topk_prob", t.norm_topk_prob);
  f.read("routed_scaling_factor", t.routed_scaling_factor);
  f.read("gate_temp", t.gate_temp);
}

void read_engram_and_dspark(const JsonFields& f, TextConfig& t) {
  f.read("engram_layer_ids", t.engram_layer_ids);
  f.read("engram_num_embeddings", t.engram_num_embeddings);
  f.read("engram_max_ngram_size", t.engram_max_ngram_size);
  f.read("engram_vocab_size", t.engram_vocab_size);
  f.read("engram_n_heads", t.engram_n_heads);
  f.read("engram_head_dim", t.engram_head_dim);
  f.read("engram_pad_token_id", t.engram_pad_token_id);
  f.read("engram_compressed_vocab_size", t.engram_compressed_vocab_size);
  f.read("num_nextn_predict_layers", t.num_nextn_predict_layers);
  f.read("dspark_block_size", t.dspark_block_size);
  f.read("dspark_noise_token_id", t.dspark_noise_token_id);
  f.read("dspark_target_layer_ids", t.dspark_target_layer_ids);
  f.read("dspark_markov_rank", t.dspark_markov_rank);
  f.read("dspark_n_routed_experts", t.dspark_n_routed_experts);
  f.read("dspark_num_experts_per_tok", t.dspark_num_experts_per_tok);
}

// Values the official code reads as "off" or "same as": a negative candidate source turns
// candidate selection off; a DSpark expert count of 0 is the main layers' count.
void resolve_official_sentinels(TextConfig& t) {
  if (t.candidate_source_layer_id && *t.candidate_source_layer_id < 0)
    t.candidate_source_layer_id.reset();
  if (t.dspark_n_routed_experts == 0) t.dspark_n_routed_experts = t.n_routed_experts;
  if (t.dspark_num_experts_per_tok == 0) t.dspark_num_experts_per_tok = t.num_experts_per_tok;
}

TextConfig read_text_config(const JsonFields& top) {
  const json* obj = top.object("text_config");
  if (obj == nullptr)
    throw FormatError(top.file(),
                      "text_config: missing (a V4.1 config nests the model in text_config)");
  const JsonFields f(*obj, "text_config", top.file());
  TextConfig t;
  f.read("model_type", t.model_type);
  f.read("vocab_size", t.vocab_size);
  f.read("hidden_size", t.hidden_size);
  f.read("num_hidden_layers", t.num_hidden_layers);
  f.read("rms_norm_eps", t.rms_norm_eps);
  f.read("hc_mult", t.hc_mult);
  f.read("hc_sinkhorn_iters", t.hc_sinkhorn_iters);
  f.read("hc_eps", t.hc_eps);
  f.read("tie_word_embeddings", t.tie_word_embeddings);
  read_attention(f, t);
  read_moe(f, t);
  read_engram_and_dspark(f, t);
  resolve_official_sentinels(t);
  int64_t hash_layers = 0;
  f.read("num_hash_layers", hash_layers);
  if (hash_layers != 0)
    throw FormatError(
        top.file(),
        f.path("num_hash_layers") + ": hash-routed layers are a V4 feature, not supported by V4.1");
  return t;
}

std::optional<VisionConfig> read_vision_config(const JsonFields& top) {
  const json* obj = top.object("vision_config");
  if (obj == nullptr) return std::nullopt;
  const JsonFields f(*obj, "vision_config", top.file());
  VisionConfig v;
  f.read("model_type", v.model_type);
  f.read("num_hidden_layers", v.num_hidden_layers);
  f.read("hidden_size", v.hidden_size);
  f.read("num_attention_heads", v.num_attention_heads);
  f.read("intermediate_size", v.intermediate_size);
  f.read("patch_size", v.patch_size);
  f.read("rope_theta", v.rope_theta);
  f.read("downsample_ratio", v.downsample_ratio);
  f.read("max_image_tokens", v.max_image_tokens);
  f.read("min_pixels", v.min_pixels);
  f.read("max_wh_ratio", v.max_wh_ratio);
  f.read("norm_eps", v.norm_eps);
  if (v.num_hidden_layers == 0) return std::nullopt;  // vision_enabled is false: no tower
  return v;
}

QuantizationConfig read_quantization_config(const JsonFields& top) {
  QuantizationConfig q;
  const json* obj = top.object("quantization_config");
  if (obj == nullptr) return q;
  const JsonFields f(*obj, "quantization_config", top.file());
  f.read("quant_method", q.quant_method);
  f.read("activation_scheme", q.activation_scheme);
  f.read("scale_fmt", q.scale_fmt);
  f.read("expert_dtype", q.expert_dtype);
  std::vector<int64_t> block = {q.weight_block_size[0], q.weight_block_size[1]};
  f.read("weight_block_size", block);
  if (block.size() != 2)
    throw FormatError(top.file(),
                      f.path("weight_block_size") + ": expected two integers [out, in]");
  q.weight_block_size[0] = block[0];
  q.weight_block_size[1] = block[1];
  return q;
}

// "text_config.hidden_size", ... for every key config.json writes (one level into rope_scaling):
// errors say when the value they judge is a default rather than something the user wrote.
std::set<std::string> written_fields(const json& doc) {
  std::set<std::string> out;
  for (const auto& [key, value] : doc.items()) {
    out.insert(key);
    if (!value.is_object()) continue;
    for (const auto& [inner, inner_value] : value.items()) {
      out.insert(key + "." + inner);
      if (inner_value.is_object())
        for (const auto& [leaf, unused] : inner_value.items())
          out.insert(key + "." + inner + "." + leaf);
    }
  }
  return out;
}

}  // namespace

int64_t dspark_stages(const TextConfig& text) {
  return text.dspark_block_size > 0 ? text.num_nextn_predict_layers : 0;
}

std::string_view attn_role_name(AttnRole role) {
  switch (role) {
    case AttnRole::WindowOnly:
      return "window-only";
    case AttnRole::Full:
      return "Full";
    case AttnRole::Reindex:
      return "Reindex";
    case AttnRole::Reuse:
      return "Reuse";
  }
  return "?";
}

ModelConfig parse_model_config(std::string_view json_text, const std::string& file) {
  const json doc = parse_json_text(json_text, file);
  const JsonFields top(doc, "", file);
  ModelConfig c;
  top.read("architectures", c.architectures);
  top.read("model_type", c.model_type);
  top.read("name", c.name);
  top.read("bos_token_id", c.bos_token_id);
  top.read("eos_token_id", c.eos_token_id);
  top.read("pad_token_id", c.pad_token_id);
  top.read("image_token_id", c.image_token_id);
  std::string dtype;  // the activation dtype label ("bfloat16"): type-checked, not used
  top.read("dtype", dtype);
  c.text = read_text_config(top);
  c.vision = read_vision_config(top);
  c.quant = read_quantization_config(top);
  validate_model_config(c, file, written_fields(doc));
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  ModelConfig c = parse_model_config(read_small_file(path), path);
  if (c.name.empty()) {
    const std::filesystem::path p(path);
    c.name = p.has_parent_path() ? p.parent_path().filename().string() : p.stem().string();
  }
  return c;
}

}  // namespace flashdesk
