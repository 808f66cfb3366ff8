// The model configuration: config.json of a V4.1-style checkpoint (nested text_config,
// vision_config, quantization_config), every field of docs/model-spec.md §1.2 with the official
// ModelArgs defaults when a field is absent, plus the per-layer roles derived from it.
//
// Goals: one struct the whole engine reads; roles come from the config fields, never from layer
// numbers. Non-goals: V4 (flat) configs — a later model family gets its own parser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashdesk {

// An absent field means what it means to the official inference code: the default of its
// ModelArgs field (model.py, revision dba1be0a; names mapped as docs/model-spec.md §1.2 lists),
// which describes a small model and switches optional parts (Engram, candidate selection, DSpark,
// vision, YaRN) off. The full-size values belong to the published config.json, which writes every
// field. Fields ModelArgs lacks say what their default stands for. docs/checkpoint-format.md has
// the whole table.
struct RopeScaling {
  std::string type = "yarn";  // rope_scaling.rope_type (or .type); only yarn is implemented
  double factor = 40.0;       // rope_factor
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  // original_seq_len; 0 (the default, and what an absent rope_scaling means): no YaRN at all.
  int64_t original_max_position = 0;
};

struct TextConfig {
  std::string model_type = "deepseek_v41_text";
  int64_t vocab_size = 129280;
  int64_t hidden_size = 1024;        // dim
  int64_t num_hidden_layers = 5;     // n_layers (main blocks, without DSpark stages)
  int64_t num_attention_heads = 16;  // n_heads
  int64_t num_key_value_heads = 1;   // not in ModelArgs: one shared latent (MQA), the only layout
  int64_t head_dim = 128;
  int64_t qk_rope_head_dim = 32;  // rope_head_dim: RoPE on the last dims of each head
  int64_t q_lora_rank = 256;
  int64_t o_lora_rank = 256;
  int64_t o_groups = 8;
  std::string hidden_act = "silu";  // not in ModelArgs: the only activation
  double swiglu_limit = 0.0;        // 0: no clamp
  double rms_norm_eps = 1e-20;      // norm_eps
  // Not in ModelArgs (its max_seq_len is a runtime choice): the longest context served by
  // default. RoPE tables are computed, not stored, so it bounds nothing in the checkpoint.
  int64_t max_position_embeddings = 1048576;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t n_routed_experts = 8;
  int64_t n_shared_experts = 1;
  int64_t num_experts_per_tok = 2;       // n_activated_experts
  int64_t moe_intermediate_size = 1024;  // moe_inter_dim
  std::string scoring_func = "sqrtsoftplus";
  std::string topk_method = "noaux_tc";  // not in ModelArgs: the only routing method
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;  // route_scale
  int64_t sliding_window = 128;        // window_size (n_win)
  // One entry per main layer, then one per DSpark stage (num_nextn_predict_layers entries).
  std::vector<int64_t> compress_ratios = {0, 2, 2, 1, 1, 0};
  double compress_rope_theta = 40000.0;
  std::vector<int64_t> kv_source_layer_ids = {1, 3};
  std::vector<int64_t> index_source_layer_ids = {1, 3};
  int64_t index_n_heads = 16;
  int64_t index_head_dim = 64;
  int64_t index_topk = 64;
  // Absent, null or negative: no two-level candidate selection (the other two are then unused).
  std::optional<int64_t> candidate_source_layer_id;
  int64_t candidate_topk_blocks = 0;
  int64_t candidate_block_size = 0;
  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  std::vector<int64_t> engram_layer_ids;  // empty: no Engram (the other engram_* are then unused)
  // Table rows per Engram layer: the sum of that layer's primes (docs/model-spec.md §7 step 4).
  std::vector<int64_t> engram_num_embeddings;
  int64_t engram_max_ngram_size = 1;
  int64_t engram_vocab_size = 0;
  int64_t engram_n_heads = 0;
  int64_t engram_head_dim = 0;
  int64_t engram_pad_token_id = 2;  // engram_pad_id
  // len(tokenizer) keys after normalisation; may exceed vocab_size (the map covers the tokenizer).
  int64_t engram_compressed_vocab_size = 0;
  // n_mtp_layers. The stages exist only when dspark_block_size > 0 too (dspark_stages()), as in
  // the official Transformer; compress_ratios always has an entry for each.
  int64_t num_nextn_predict_layers = 1;
  int64_t dspark_block_size = 0;
  int64_t dspark_noise_token_id = 0;
  std::vector<int64_t> dspark_target_layer_ids;
  int64_t dspark_markov_rank = 256;
  // 0 (the default) means the main layers' count, as ModelArgs.get_moe_config reads it; the
  // parser resolves it, so these always hold the count in use.
  int64_t dspark_n_routed_experts = 0;
  int64_t dspark_num_experts_per_tok = 0;  // dspark_n_activated_experts
  bool tie_word_embeddings = false;        // not in ModelArgs: a separate head.weight
  double gate_temp = 1.0;                  // reference-only, not in the published config
};

// DSpark stages the checkpoint holds: num_nextn_predict_layers when dspark_block_size > 0, else 0.
int64_t dspark_stages(const TextConfig& text);

struct VisionConfig {
  std::string model_type = "deepseek_v41_vision";
  // vision_n_layers; 0 (the default) switches vision off: the parser then drops vision_config.
  int64_t num_hidden_layers = 0;
  int64_t hidden_size = 1024;
  int64_t num_attention_heads = 16;
  int64_t intermediate_size = 2816;
  int64_t patch_size = 14;
  double rope_theta = 10000.0;
  int64_t downsample_ratio = 3;
  int64_t max_image_tokens = 1024;
  int64_t min_pixels = 295936;
  std::optional<double> max_wh_ratio;
  double norm_eps = 1e-6;  // not in ModelArgs: the ViT's RMSNorm epsilon
};

struct QuantizationConfig {
  std::string quant_method = "fp8";
  std::string activation_scheme = "dynamic";
  int64_t weight_block_size[2] = {32, 32};  // [out, in] tile of the FP8 scales; only 32x32
  std::string scale_fmt = "ue8m0";
  std::string expert_dtype = "fp4";
};

struct ModelConfig {
  std::vector<std::string> architectures = {"DeepseekV41ForCausalLM"};
  std::string model_type = "deepseek_v41";
  std::string name;  // optional "name" field; else the directory name (used in reports)
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  int64_t pad_token_id = 2;
  int64_t image_token_id = 129264;
  TextConfig text;
  std::optional<VisionConfig> vision;  // absent (or 0 layers): a text-only model
  QuantizationConfig quant;
};

// CSA2 role of one main layer (docs/model-spec.md §1.2 table, §3.5-3.7).
enum class AttnRole {
  WindowOnly,  // compress ratio 0: sliding window only
  Full,        // own compressor (global KV + index keys) and own indexer
  Reindex,     // own indexer query over its KV source's keys (restricted to candidates if any)
  Reuse,       // the KV source's entries with the most recent index source's top-k
};

struct LayerRole {
  int64_t layer = 0;
  int64_t compress_ratio = 0;
  AttnRole role = AttnRole::WindowOnly;
  int64_t kv_source = -1;          // layer owning the compressed KV and index keys read here
  int64_t index_source = -1;       // layer whose top-k this layer uses (itself if it indexes)
  int64_t candidate_source = -1;   // layer whose candidate blocks restrict this layer's indexer
  bool builds_candidates = false;  // this layer is the candidate source
  bool engram = false;             // Engram applied to the stream before this block
  bool decoder = false;            // part of the CED decoder (bounded replay runs it on the tail)
};

std::string_view attn_role_name(AttnRole role);

// Parses config.json text; `file` names it in errors. Throws FormatError on invalid JSON, a
// field of the wrong type, or values that contradict each other (names the field).
ModelConfig parse_model_config(std::string_view json_text, const std::string& file);
ModelConfig load_model_config(const std::string& path);

// Derives each main layer's role from compress_ratios and the *_source_layer_ids fields.
// Throws FormatError when the fields are inconsistent (e.g. a Reuse layer with no KV source).
std::vector<LayerRole> derive_layer_roles(const TextConfig& text);

// First layer of the CED decoder: the last KV source, when every later layer reads its KV from
// it and none has Engram; num_hidden_layers when the model has no such decoder.
int64_t decoder_first_layer(const TextConfig& text);

}  // namespace flashdesk
