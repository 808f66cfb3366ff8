// Parameter, byte and KV-size arithmetic over the expected tensor list and the layer roles.
#include "engine/checkpoint/model_stats.h"

#include <map>
#include <string_view>

namespace flashdesk {
namespace {

bool contains(std::string_view name, std::string_view part) {
  return name.find(part) != std::string_view::npos;
}

// What a token reads of main layer `layer`'s tensors when it runs the whole block.
int64_t active_in_layer(const TensorSpec& s, const TextConfig& t) {
  if (contains(s.name, ".ffn.experts.")) {
    // Each expert's tensors appear once per expert: a token uses top-k of n.
    return s.parameters() * t.num_experts_per_tok / t.n_routed_experts;
  }
  if (contains(s.name, ".engram.embed.weight"))  // one row per hash table
    return (t.engram_max_ngram_size - 1) * t.engram_n_heads * t.engram_head_dim;
  return s.parameters();
}

// The tensors of the decoder's first layer that turn the encoder output into global KV.
bool projects_decoder_kv(std::string_view name) {
  return contains(name, ".hc_attn_") || contains(name, ".attn_norm.") ||
         contains(name, ".attn.compressor.") || contains(name, ".attn.indexer.wk.") ||
         contains(name, ".attn.indexer.k_norm.");
}

}  // namespace

ParameterCounts count_parameters(const ModelConfig& config) {
  const TextConfig& t = config.text;
  const int64_t decoder_first = decoder_first_layer(t);
  ParameterCounts c;
  for (const TensorSpec& s : expected_tensors(config)) {
    const int64_t n = s.parameters();
    c.total += n;
    const int64_t layer = main_layer_of(s.name);
    if (s.name.starts_with("mtp.")) {
      c.dspark += n;
      continue;
    }
    if (layer < 0) {
      const bool text_part =
          s.name == "embed.weight" || s.name == "norm.weight" || s.name == "head.weight";
      (text_part ? c.backbone : c.vision) += n;
      if (s.name == "head.weight") c.active_decode += n;
      if (s.name == "embed.weight") {  // one row per token
        c.active_decode += t.hidden_size;
        c.active_prefill += t.hidden_size;
      }
      continue;
    }
    const bool engram = contains(s.name, ".engram.");
    (engram ? c.engram : c.backbone) += n;
    if (contains(s.name, ".engram.embed.weight")) c.engram_tables += n;
    const int64_t active = active_in_layer(s, t);
    c.active_decode += active;
    if (layer < decoder_first)
      c.active_prefill += active;
    else if (layer == decoder_first && projects_decoder_kv(s.name))
      c.active_prefill += active;
  }
  if (t.tie_word_embeddings) c.active_decode += t.vocab_size * t.hidden_size;
  return c;
}

std::vector<DTypeTotal> bytes_by_dtype(const std::vector<TensorSpec>& specs) {
  std::map<DType, DTypeTotal> totals;
  for (const TensorSpec& s : specs) {
    DTypeTotal& d = totals.try_emplace(s.dtype, DTypeTotal{s.dtype}).first->second;
    ++d.tensors;
    d.bytes += s.nbytes();
  }
  std::vector<DTypeTotal> out;
  for (const auto& [dtype, total] : totals) out.push_back(total);
  return out;
}

KvBytesPerToken kv_bytes_per_token(const ModelConfig& config) {
  const TextConfig& t = config.text;
  const double main_entry = static_cast<double>(t.head_dim / 2 + t.head_dim / 16);
  const double index_entry = static_cast<double>(t.index_head_dim / 2 + t.index_head_dim / 32);
  const int64_t decoder_first = decoder_first_layer(t);
  KvBytesPerToken kv;
  for (const LayerRole& r : derive_layer_roles(t)) {
    if (r.role != AttnRole::Full) continue;
    const double ratio = static_cast<double>(r.compress_ratio);
    kv.main += main_entry / ratio;
    kv.index += index_entry / ratio;
    ((r.layer < decoder_first) ? kv.encoder : kv.decoder) += (main_entry + index_entry) / ratio;
  }
  kv.window_bytes_per_entry = t.head_dim + t.head_dim / 32;
  kv.window_bytes_per_sequence =
      static_cast<uint64_t>(t.num_hidden_layers * t.sliding_window * kv.window_bytes_per_entry);
  return kv;
}

}  // namespace flashdesk
