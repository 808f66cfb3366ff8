// The rules a V4.1 config must satisfy before anything sizes tensors from it.
#include "engine/checkpoint/config_validate.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/checkpoint/engram_primes.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 20;  // any width (hidden, ranks, inter sizes)
constexpr int64_t kMaxVocab = int64_t{1} << 31;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxExperts = 65536;
constexpr int64_t kMaxEngramVocab = int64_t{1} << 36;
constexpr int64_t kMaxEngramTables = 4096;  // primes drawn over all Engram layers

std::string list_text(const std::vector<int64_t>& v) {
  std::string s("[");
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s.append(", ");
    s.append(std::to_string(v[i]));
  }
  s.append("]");
  return s;
}

// Names the field in every message; `path` is e.g. "text_config.hidden_size". A value the file
// does not write is marked as the default it is, so no message blames the user for it.
class Checker {
 public:
  Checker(const std::string& file, const std::set<std::string>& written)
      : file_(file), written_(written) {}

  bool written(const std::string& path) const {
    return written_.contains(path.substr(0, path.find_first_of("[ ")));
  }
  // The value of another field, for messages about relations between fields.
  std::string value(const std::string& path, int64_t v) const {
    return mark(path, std::to_string(v));
  }
  std::string value(const std::string& path, const std::vector<int64_t>& v) const {
    return mark(path, list_text(v));
  }
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    const std::string name = path.substr(0, path.find_first_of("[ "));
    const std::string field = name.substr(name.rfind('.') + 1);
    throw FormatError(file_, path + ": " + what +
                                 (written(path) ? ""
                                                : " (" + field +
                                                      " is not in the file: that is its "
                                                      "default, the official ModelArgs one)"));
  }
  void range(const std::string& path, int64_t v, int64_t lo, int64_t hi) const {
    if (v < lo || v > hi)
      fail(path, std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  }
  void multiple(const std::string& path, int64_t v, int64_t of, const char* why) const {
    if (v % of != 0)
      fail(path,
           std::to_string(v) + " is not a multiple of " + std::to_string(of) + " (" + why + ")");
  }
  void positive(const std::string& path, double v) const {
    if (!(v > 0)) fail(path, "must be positive");
  }
  void equals(const std::string& path, const std::string& v, const char* expected) const {
    if (v != expected) fail(path, "'" + v + "' is not supported (expects '" + expected + "')");
  }
  void token(const std::string& path, int64_t id, const std::string& vocab_path,
             int64_t vocab) const {
    if (id < 0 || id >= vocab)
      fail(path, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                     value(vocab_path, vocab) + ")");
  }
  // Strictly increasing ids in [0, n).
  void layer_list(const std::string& path, const std::vector<int64_t>& ids,
                  const std::string& n_path, int64_t n) const {
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string at = path + "[" + std::to_string(i) + "]";
      if (ids[i] < 0 || ids[i] >= n)
        fail(at, "layer " + std::to_string(ids[i]) + " does not exist (num_hidden_layers " +
                     value(n_path, n) + ")");
      if (i > 0 && ids[i] <= ids[i - 1]) fail(at, "layer ids must be strictly increasing");
    }
  }

 private:
  std::string mark(const std::string& path, std::string text) const {
    return written(path) ? text : text + " (its default: not in the file)";
  }

  const std::string& file_;
  const std::set<std::string>& written_;
};

const std::string T = "text_config.";

void check_quantization(const Checker& c, const QuantizationConfig& q) {
  const std::string Q = "quantization_config.";
  c.equals(Q + "quant_method", q.quant_method, "fp8");
  c.equals(Q + "activation_scheme", q.activation_scheme, "dynamic");
  c.equals(Q + "scale_fmt", q.scale_fmt, "ue8m0");
  c.equals(Q + "expert_dtype", q.expert_dtype, "fp4");
  if (q.weight_block_size[0] != 32 || q.weight_block_size[1] != 32)
    c.fail(Q + "weight_block_size", list_text({q.weight_block_size[0], q.weight_block_size[1]}) +
                                        " is not supported (V4.1 uses [32, 32])");
}

void check_dimensions(const Checker& c, const TextConfig& t) {
  c.range(T + "vocab_size", t.vocab_size, 1, kMaxVocab);
  c.range(T + "hidden_size", t.hidden_size, 32, kMaxDim);
  c.multiple(T + "hidden_size", t.hidden_size, 32, "the FP8 quantisation block");
  c.range(T + "num_hidden_layers", t.num_hidden_layers, 1, kMaxLayers);
  c.range(T + "num_attention_heads", t.num_attention_heads, 1, kMaxHeads);
  c.range(T + "num_key_value_heads", t.num_key_value_heads, 1, 1);  // one shared latent (MQA)
  c.range(T + "head_dim", t.head_dim, 32, 65536);
  c.multiple(T + "head_dim", t.head_dim, 32, "the FP8 window-KV quantisation block");
  c.range(T + "qk_rope_head_dim", t.qk_rope_head_dim, 0, std::min(t.head_dim, t.index_head_dim));
  c.multiple(T + "qk_rope_head_dim", t.qk_rope_head_dim, 2, "RoPE rotates pairs");
  c.range(T + "q_lora_rank", t.q_lora_rank, 32, kMaxDim);
  c.multiple(T + "q_lora_rank", t.q_lora_rank, 32, "the FP8 quantisation block");
  c.range(T + "o_groups", t.o_groups, 1, t.num_attention_heads);
  if (t.num_attention_heads % t.o_groups != 0)
    c.fail(T + "o_groups", std::to_string(t.o_groups) + " does not divide num_attention_heads " +
                               c.value(T + "num_attention_heads", t.num_attention_heads));
  c.range(T + "o_lora_rank", t.o_lora_rank, 32, kMaxDim);
  c.multiple(T + "o_lora_rank", t.o_lora_rank, 32, "the FP8 quantisation block");
  c.range(T + "max_position_embeddings", t.max_position_embeddings, 1, int64_t{1} << 40);
  c.range(T + "sliding_window", t.sliding_window, 1, kMaxDim);
  c.range(T + "hc_mult", t.hc_mult, 1, 64);
  c.range(T + "hc_sinkhorn_iters", t.hc_sinkhorn_iters, 1, 1000);
  c.range(T + "num_nextn_predict_layers", t.num_nextn_predict_layers, 0, 16);
}

void check_scalars(const Checker& c, const TextConfig& t) {
  c.positive(T + "rms_norm_eps", t.rms_norm_eps);
  c.positive(T + "hc_eps", t.hc_eps);
  c.positive(T + "rope_theta", t.rope_theta);
  c.positive(T + "compress_rope_theta", t.compress_rope_theta);
  c.equals(T + "rope_scaling.rope_type", t.rope_scaling.type, "yarn");
  if (!(t.rope_scaling.factor >= 1)) c.fail(T + "rope_scaling.factor", "must be >= 1");
  c.positive(T + "rope_scaling.beta_fast", t.rope_scaling.beta_fast);
  c.positive(T + "rope_scaling.beta_slow", t.rope_scaling.beta_slow);
  // 0: no YaRN (the official original_seq_len = 0, and what an absent rope_scaling means).
  c.range(T + "rope_scaling.original_max_position_embeddings", t.rope_scaling.original_max_position,
          0, int64_t{1} << 40);
  if (t.swiglu_limit < 0) c.fail(T + "swiglu_limit", "must not be negative");
  c.positive(T + "routed_scaling_factor", t.routed_scaling_factor);
  c.positive(T + "gate_temp", t.gate_temp);
}

void check_moe(const Checker& c, const TextConfig& t) {
  c.equals(T + "hidden_act", t.hidden_act, "silu");
  c.equals(T + "scoring_func", t.scoring_func, "sqrtsoftplus");
  c.equals(T + "topk_method", t.topk_method, "noaux_tc");
  c.range(T + "n_routed_experts", t.n_routed_experts, 1, kMaxExperts);
  c.range(T + "num_experts_per_tok", t.num_experts_per_tok, 1, t.n_routed_experts);
  c.range(T + "n_shared_experts", t.n_shared_experts, 0, 64);
  c.range(T + "moe_intermediate_size", t.moe_intermediate_size, 32, kMaxDim);
  c.multiple(T + "moe_intermediate_size", t.moe_intermediate_size, 32, "the FP4 scale block");
}

void check_compression(const Checker& c, const TextConfig& t) {
  const int64_t n = t.num_hidden_layers + t.num_nextn_predict_layers;
  if (static_cast<int64_t>(t.compress_ratios.size()) != n)
    c.fail(T + "compress_ratios",
           "has " + std::to_string(t.compress_ratios.size()) + " entries; expected " +
               std::to_string(n) + " (num_hidden_layers " +
               c.value(T + "num_hidden_layers", t.num_hidden_layers) +
               " + num_nextn_predict_layers " +
               c.value(T + "num_nextn_predict_layers", t.num_nextn_predict_layers) + ")");
  for (int64_t i = 0; i < n; ++i) {
    const std::string at = T + "compress_ratios[" + std::to_string(i) + "]";
    c.range(at, t.compress_ratios[i], 0, kMaxDim);
    if (i >= t.num_hidden_layers && t.compress_ratios[i] != 0)
      c.fail(at, "DSpark stages attend to their window only (ratio must be 0)");
  }
  c.range(T + "index_n_heads", t.index_n_heads, 1, kMaxHeads);
  c.range(T + "index_head_dim", t.index_head_dim, 32, 65536);
  c.multiple(T + "index_head_dim", t.index_head_dim, 32, "the FP4 index-key block");
  c.range(T + "index_topk", t.index_topk, 1, int64_t{1} << 24);
  if (!t.candidate_source_layer_id) return;  // the two below are unused without a source
  c.range(T + "candidate_topk_blocks", t.candidate_topk_blocks, 1, int64_t{1} << 24);
  c.range(T + "candidate_block_size", t.candidate_block_size, 1, 65536);
}

void check_engram(const Checker& c, const TextConfig& t) {
  c.layer_list(T + "engram_layer_ids", t.engram_layer_ids, T + "num_hidden_layers",
               t.num_hidden_layers);
  if (t.engram_num_embeddings.size() != t.engram_layer_ids.size())
    c.fail(T + "engram_num_embeddings", "has " + std::to_string(t.engram_num_embeddings.size()) +
                                            " entries " + list_text(t.engram_num_embeddings) +
                                            "; expected one per layer of engram_layer_ids " +
                                            c.value(T + "engram_layer_ids", t.engram_layer_ids));
  if (t.engram_layer_ids.empty()) return;  // no Engram: the other engram_* fields are unused
  c.range(T + "engram_max_ngram_size", t.engram_max_ngram_size, 2, 16);
  c.range(T + "engram_n_heads", t.engram_n_heads, 1, 256);
  c.range(T + "engram_head_dim", t.engram_head_dim, 32, 4096);
  c.multiple(T + "engram_head_dim", t.engram_head_dim, 32, "the per-32 scales of the tables");
  c.range(T + "engram_vocab_size", t.engram_vocab_size, 2, kMaxEngramVocab);
  // The map covers the tokenizer (len(tokenizer) entries), which may be longer than the
  // embedding: the compressed vocabulary may exceed vocab_size, and the pad id is checked
  // against the map when it is loaded or built.
  c.range(T + "engram_compressed_vocab_size", t.engram_compressed_vocab_size, 1, kMaxVocab);
  c.range(T + "engram_pad_token_id", t.engram_pad_token_id, 0, kMaxVocab - 1);
  const int64_t tables = static_cast<int64_t>(t.engram_layer_ids.size()) *
                         (t.engram_max_ngram_size - 1) * t.engram_n_heads;
  if (tables > kMaxEngramTables)
    c.fail(T + "engram_n_heads", std::to_string(tables) + " hash tables is more than supported");
  const auto primes = engram_primes(t);
  for (size_t i = 0; i < primes.size(); ++i) {
    int64_t rows = 0;
    for (int64_t p : primes[i]) rows += p;
    if (t.engram_num_embeddings[i] != rows)
      c.fail(T + "engram_num_embeddings[" + std::to_string(i) + "]",
             std::to_string(t.engram_num_embeddings[i]) + " != " + std::to_string(rows) +
                 ", the sum of layer " + std::to_string(t.engram_layer_ids[i]) +
                 "'s table primes (first unused primes >= engram_vocab_size " +
                 c.value(T + "engram_vocab_size", t.engram_vocab_size) + ")");
  }
}

void check_dspark(const Checker& c, const TextConfig& t) {
  c.range(T + "dspark_block_size", t.dspark_block_size, 0, 1024);
  if (dspark_stages(t) == 0) return;  // no stages: the other dspark_* fields are unused
  c.token(T + "dspark_noise_token_id", t.dspark_noise_token_id, T + "vocab_size", t.vocab_size);
  if (t.dspark_target_layer_ids.empty())
    c.fail(T + "dspark_target_layer_ids", "empty, but DSpark stages are configured");
  c.range(T + "dspark_target_layer_ids (count)",
          static_cast<int64_t>(t.dspark_target_layer_ids.size()), 1, 64);
  for (size_t i = 0; i < t.dspark_target_layer_ids.size(); ++i)
    c.range(T + "dspark_target_layer_ids[" + std::to_string(i) + "]", t.dspark_target_layer_ids[i],
            0, t.num_hidden_layers - 1);
  c.range(T + "dspark_markov_rank", t.dspark_markov_rank, 1, kMaxDim);
  c.range(T + "dspark_n_routed_experts", t.dspark_n_routed_experts, 1, kMaxExperts);
  c.range(T + "dspark_num_experts_per_tok", t.dspark_num_experts_per_tok, 1,
          t.dspark_n_routed_experts);
}

void check_vision(const Checker& c, const VisionConfig& v) {
  const std::string V = "vision_config.";
  c.range(V + "num_hidden_layers", v.num_hidden_layers, 0, 1024);
  c.range(V + "hidden_size", v.hidden_size, 1, kMaxDim);
  c.range(V + "num_attention_heads", v.num_attention_heads, 1, kMaxHeads);
  if (v.hidden_size % v.num_attention_heads != 0 ||
      (v.hidden_size / v.num_attention_heads) % 4 != 0)
    c.fail(V + "num_attention_heads",
           "hidden_size / num_attention_heads must be a multiple of 4 (2D rotate-half RoPE)");
  c.range(V + "intermediate_size", v.intermediate_size, 1, kMaxDim);
  c.range(V + "patch_size", v.patch_size, 1, 1024);
  c.range(V + "downsample_ratio", v.downsample_ratio, 1, 64);
  c.range(V + "max_image_tokens", v.max_image_tokens, 3, int64_t{1} << 24);
  c.range(V + "min_pixels", v.min_pixels, 1, int64_t{1} << 40);
  c.positive(V + "rope_theta", v.rope_theta);
  c.positive(V + "norm_eps", v.norm_eps);
  if (v.max_wh_ratio) c.positive(V + "max_wh_ratio", *v.max_wh_ratio);
}

// The layer-role fields a role error may stem from that the file leaves at their defaults.
std::string defaults_in_roles(const Checker& c, const TextConfig& t) {
  std::string out;
  auto note = [&](const char* key, const std::string& value) {
    if (c.written(T + key)) return;
    out += (out.empty() ? " (defaults in use, not in the file: " : ", ") + std::string(key) + " " +
           value;
  };
  note("num_hidden_layers", std::to_string(t.num_hidden_layers));
  note("compress_ratios", list_text(t.compress_ratios));
  note("kv_source_layer_ids", list_text(t.kv_source_layer_ids));
  note("index_source_layer_ids", list_text(t.index_source_layer_ids));
  return out.empty() ? out : out + ")";
}

}  // namespace

void validate_model_config(const ModelConfig& config, const std::string& file,
                           const std::set<std::string>& written) {
  const Checker c(file, written);
  c.equals("model_type", config.model_type, "deepseek_v41");
  check_quantization(c, config.quant);
  const TextConfig& t = config.text;
  check_dimensions(c, t);
  check_scalars(c, t);
  check_moe(c, t);
  check_compression(c, t);
  check_dspark(c, t);
  check_engram(c, t);
  c.token("bos_token_id", config.bos_token_id, T + "vocab_size", t.vocab_size);
  c.token("eos_token_id", config.eos_token_id, T + "vocab_size", t.vocab_size);
  c.token("pad_token_id", config.pad_token_id, T + "vocab_size", t.vocab_size);
  if (config.vision) {
    c.token("image_token_id", config.image_token_id, T + "vocab_size", t.vocab_size);
    check_vision(c, *config.vision);
  }
  try {
    derive_layer_roles(t);  // source ids: in range, of the right kind, consistent
  } catch (const FormatError& e) {
    throw FormatError(file, e.what() + defaults_in_roles(c, t));
  }
}

}  // namespace flashdesk
