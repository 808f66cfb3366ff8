// expected_tensors(): docs/model-spec.md §2.4 generalised to any validated config. Names follow the
// reference (no `model.` prefix); docs/checkpoint-format.md lists them with shapes and dtypes.
#include "engine/checkpoint/tensor_spec.h"

#include <string>

namespace flashdesk {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

class SpecList {
 public:
  SpecList(std::vector<TensorSpec>& out, int64_t block) : out_(out), block_(block) {}

  void add(std::string name, DType dtype, std::vector<int64_t> shape) {
    out_.push_back({std::move(name), dtype, std::move(shape)});
  }
  void bf16(const std::string& name, std::vector<int64_t> shape) {
    add(name, DType::BF16, std::move(shape));
  }
  void f32(const std::string& name, std::vector<int64_t> shape) {
    add(name, DType::F32, std::move(shape));
  }
  void norm(const std::string& module, int64_t dim) { bf16(module + ".weight", {dim}); }
  // Dense FP8 linear `module` [out, in]: E4M3 weight + one UE8M0 scale per block x block tile.
  void fp8(const std::string& module, int64_t out, int64_t in) {
    add(module + ".weight", DType::F8_E4M3, {out, in});
    add(module + ".scale", DType::F8_E8M0, {ceil_div(out, block_), ceil_div(in, block_)});
  }
  // Routed expert linear [out, in]: two E2M1 codes per I8 byte + one E8M0 scale per 32 inputs.
  void fp4(const std::string& module, int64_t out, int64_t in) {
    add(module + ".weight", DType::I8, {out, in / 2});
    add(module + ".scale", DType::F8_E8M0, {out, in / 32});
  }

 private:
  std::vector<TensorSpec>& out_;
  int64_t block_;
};

// The parts every block has (main layers and DSpark stages): norms, mHC, window attention, MoE.
void add_block_common(SpecList& s, const TextConfig& t, const std::string& p, int64_t n_experts) {
  const int64_t dim = t.hidden_size, hc = t.hc_mult, mix = (2 + hc) * hc;
  const int64_t heads = t.num_attention_heads, D = t.head_dim, G = t.o_groups;
  s.norm(p + "attn_norm", dim);
  s.norm(p + "ffn_norm", dim);
  for (const char* sub : {"hc_attn", "hc_ffn"}) {
    s.f32(p + sub + "_fn", {mix, hc * dim});
    s.f32(p + sub + "_base", {mix});
    s.f32(p + sub + "_scale", {3});
  }
  s.fp8(p + "attn.wq_a", t.q_lora_rank, dim);
  s.norm(p + "attn.q_norm", t.q_lora_rank);
  s.fp8(p + "attn.wq_b", heads * D, t.q_lora_rank);
  s.fp8(p + "attn.wkv", D, dim);
  s.norm(p + "attn.kv_norm", D);
  s.fp8(p + "attn.wo_a", G * t.o_lora_rank, heads * D / G);
  s.fp8(p + "attn.wo_b", dim, G * t.o_lora_rank);
  s.f32(p + "attn.attn_sink", {heads});
  s.bf16(p + "ffn.gate.weight", {n_experts, dim});
  s.f32(p + "ffn.gate.bias", {n_experts});
  s.f32(p + "ffn.gate.bias_vl", {n_experts});
  if (t.n_shared_experts > 0) {
    const int64_t inter = t.n_shared_experts * t.moe_intermediate_size;
    s.fp8(p + "ffn.shared_experts.w1", inter, dim);
    s.fp8(p + "ffn.shared_experts.w2", dim, inter);
    s.fp8(p + "ffn.shared_experts.w3", inter, dim);
  }
  for (int64_t e = 0; e < n_experts; ++e) {
    const std::string x = p + "ffn.experts." + std::to_string(e) + ".";
    s.fp4(x + "w1", t.moe_intermediate_size, dim);
    s.fp4(x + "w2", dim, t.moe_intermediate_size);
    s.fp4(x + "w3", t.moe_intermediate_size, dim);
  }
}

void add_compressed_attention(SpecList& s, const TextConfig& t, const LayerRole& r,
                              const std::string& p) {
  const int64_t dim = t.hidden_size, D = t.head_dim;
  if (r.role == AttnRole::Full) {  // KV source: compressor + index-key projection
    s.bf16(p + "attn.compressor.wkv.weight", {D, dim});
    if (r.compress_ratio > 1) s.bf16(p + "attn.compressor.wgate.weight", {D, dim});
    s.norm(p + "attn.compressor.norm", D);
    s.bf16(p + "attn.indexer.wk.weight", {t.index_head_dim, D});
    s.norm(p + "attn.indexer.k_norm", t.index_head_dim);
  }
  if (r.role == AttnRole::Full || r.role == AttnRole::Reindex) {  // index source: own query
    s.fp8(p + "attn.indexer.wq_b", t.index_n_heads * t.index_head_dim, t.q_lora_rank);
    s.bf16(p + "attn.indexer.weights_proj.weight", {t.index_n_heads, dim});
  }
}

void add_engram(SpecList& s, const TextConfig& t, int64_t rows, const std::string& p) {
  const int64_t hd = t.engram_head_dim;
  s.add(p + "engram.embed.weight", DType::F8_E4M3, {rows, hd});
  s.add(p + "engram.embed.scale", DType::F8_E8M0, {rows, hd / 32});
  s.fp8(p + "engram.wkv", t.hidden_size * (t.hc_mult + 1),
        (t.engram_max_ngram_size - 1) * t.engram_n_heads * hd);
  s.bf16(p + "engram.q_weight", {t.hc_mult, t.hidden_size});
  s.bf16(p + "engram.k_weight", {t.hc_mult, t.hidden_size});
}

void add_main_layer(SpecList& s, const TextConfig& t, const LayerRole& r) {
  const std::string p = "layers." + std::to_string(r.layer) + ".";
  for (size_t i = 0; i < t.engram_layer_ids.size(); ++i)
    if (t.engram_layer_ids[i] == r.layer) add_engram(s, t, t.engram_num_embeddings[i], p);
  add_block_common(s, t, p, t.n_routed_experts);
  add_compressed_attention(s, t, r, p);
}

void add_vision(SpecList& s, const VisionConfig& v, int64_t llm_dim) {
  const int64_t d = v.hidden_size, patch = 3 * v.patch_size * v.patch_size;
  const int64_t cell = d * v.downsample_ratio * v.downsample_ratio;
  s.bf16("vision.patch_embed.proj.weight", {d, patch});
  s.bf16("vision.patch_embed.proj.bias", {d});
  for (int64_t b = 0; b < v.num_hidden_layers; ++b) {
    const std::string p = "vision.blocks." + std::to_string(b) + ".";
    s.norm(p + "norm1", d);
    s.norm(p + "norm2", d);
    s.bf16(p + "attn.wqkv.weight", {3 * d, d});
    s.bf16(p + "attn.wqkv.bias", {3 * d});
    s.bf16(p + "attn.wo.weight", {d, d});
    s.bf16(p + "attn.wo.bias", {d});
    s.bf16(p + "mlp.w1.weight", {2 * v.intermediate_size, d});  // gate || up
    s.bf16(p + "mlp.w2.weight", {d, v.intermediate_size});
  }
  s.norm("vision.norm", d);
  s.bf16("aligner.w1.weight", {llm_dim, cell});
  s.bf16("aligner.w1.bias", {llm_dim});
  s.bf16("aligner.w2.weight", {llm_dim, llm_dim});
  s.bf16("aligner.w2.bias", {llm_dim});
  for (const char* name : {"image_start", "image_end", "image_newline"}) s.bf16(name, {llm_dim});
}

void add_dspark(SpecList& s, const TextConfig& t) {
  const int64_t dim = t.hidden_size, stages = dspark_stages(t);
  const int64_t targets = static_cast<int64_t>(t.dspark_target_layer_ids.size());
  for (int64_t m = 0; m < stages; ++m) {
    const std::string p = "mtp." + std::to_string(m) + ".";
    if (m == 0) {
      s.fp8(p + "main_proj", dim, targets * dim);
      s.norm(p + "main_norm", dim);
    }
    add_block_common(s, t, p, t.dspark_n_routed_experts);
    if (m == stages - 1) {
      s.norm(p + "norm", dim);
      s.bf16(p + "markov_head.embed.weight", {t.vocab_size, t.dspark_markov_rank});
      s.bf16(p + "markov_head.head.weight", {t.vocab_size, t.dspark_markov_rank});
      s.bf16(p + "confidence_head.proj.weight", {1, dim + t.dspark_markov_rank});
    }
  }
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& config) {
  const TextConfig& t = config.text;
  std::vector<TensorSpec> out;
  SpecList s(out, config.quant.weight_block_size[0]);
  s.bf16("embed.weight", {t.vocab_size, t.hidden_size});
  for (const LayerRole& r : derive_layer_roles(t)) add_main_layer(s, t, r);
  s.norm("norm", t.hidden_size);
  if (!t.tie_word_embeddings) s.bf16("head.weight", {t.vocab_size, t.hidden_size});
  if (config.vision) add_vision(s, *config.vision, t.hidden_size);
  if (dspark_stages(t) > 0) add_dspark(s, t);
  return out;
}

}  // namespace flashdesk
