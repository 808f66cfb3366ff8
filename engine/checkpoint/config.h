// The model configuration: config.json of a V4.1-style checkpoint (nested text_config,
// vision_config, quantization_config), every field of docs/model-spec.md §1.2 with the reference's
// defaults when a field is absent, plus the per-layer roles derived from it.
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

struct RopeScaling {
  std::string type = "yarn";  // rope_scaling.rope_type (or .type)
  double factor = 16.0;       // rope_factor
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position = 65536;  // original_seq_len
};

// The full-size model's per-layer compress ratios (40 main layers + 3 DSpark stages).
std::vector<int64_t> full_size_compress_ratios();

// Every field defaults to the full-size DeepSeek-V4.1-Flash value, which is what the reference
// uses when a field is absent: `{"text_config": {}}` describes the full-size model.
struct TextConfig {
  std::string model_type = "deepseek_v41_text";
  int64_t vocab_size = 129280;
  int64_t hidden_size = 5120;        // dim
  int64_t num_hidden_layers = 40;    // n_layers (main blocks, without DSpark stages)
  int64_t num_attention_heads = 64;  // n_heads
  int64_t num_key_value_heads = 1;
  int64_t head_dim = 512;
  int64_t qk_rope_head_dim = 64;  // rope_head_dim: RoPE on the last 64 dims
  int64_t q_lora_rank = 1280;
  int64_t o_lora_rank = 1024;
  int64_t o_groups = 8;
  std::string hidden_act = "silu";
  double swiglu_limit = 10.0;
  double rms_norm_eps = 1e-20;  // norm_eps
  int64_t max_position_embeddings = 1048576;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t n_routed_experts = 384;
  int64_t n_shared_experts = 1;
  int64_t num_experts_per_tok = 6;       // n_activated_experts
  int64_t moe_intermediate_size = 2304;  // moe_inter_dim
  std::string scoring_func = "sqrtsoftplus";
  std::string topk_method = "noaux_tc";
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.5;  // route_scale
  int64_t sliding_window = 128;        // window_size (n_win)
  // One entry per main layer, then one per DSpark stage (num_nextn_predict_layers entries).
  // Default (absent field): the full-size [0,0] + [2]*18 + [1]*20 + [0,0,0].
  std::vector<int64_t> compress_ratios = full_size_compress_ratios();
  double compress_rope_theta = 160000.0;
  std::vector<int64_t> kv_source_layer_ids = {2, 8, 14, 20};
  std::vector<int64_t> index_source_layer_ids = {2, 8, 14, 20, 24, 28, 32, 36};
  int64_t index_n_heads = 32;
  int64_t index_head_dim = 128;
  int64_t index_topk = 512;
  // Absent: the reference's 20; JSON null: no two-level candidate selection.
  std::optional<int64_t> candidate_source_layer_id = 20;
  int64_t candidate_topk_blocks = 2048;
  int64_t candidate_block_size = 8;
  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  std::vector<int64_t> engram_layer_ids = {1, 14};
  // Table rows per Engram layer: the sum of that layer's primes (docs/model-spec.md §7 step 4).
  std::vector<int64_t> engram_num_embeddings = {384006168, 384016682};
  int64_t engram_max_ngram_size = 4;
  int64_t engram_vocab_size = 16000000;
  int64_t engram_n_heads = 8;
  int64_t engram_head_dim = 256;
  int64_t engram_pad_token_id = 2;
  int64_t engram_compressed_vocab_size = 99092;
  int64_t num_nextn_predict_layers = 3;  // n_mtp_layers: DSpark stages
  int64_t dspark_block_size = 5;
  int64_t dspark_noise_token_id = 128799;
  std::vector<int64_t> dspark_target_layer_ids = {37, 38, 39};
  int64_t dspark_markov_rank = 256;
  int64_t dspark_n_routed_experts = 128;
  int64_t dspark_num_experts_per_tok = 3;
  bool tie_word_embeddings = false;
  double gate_temp = 1.0;  // reference-only, not in the published config
};

struct VisionConfig {
  std::string model_type = "deepseek_v41_vision";
  int64_t num_hidden_layers = 32;
  int64_t hidden_size = 1024;
  int64_t num_attention_heads = 16;
  int64_t intermediate_size = 2816;
  int64_t patch_size = 14;
  double rope_theta = 10000.0;
  int64_t downsample_ratio = 3;
  int64_t max_image_tokens = 1024;
  int64_t min_pixels = 295936;
  std::optional<double> max_wh_ratio;
  double norm_eps = 1e-6;
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
  std::optional<VisionConfig> vision;  // absent: a text-only model
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
