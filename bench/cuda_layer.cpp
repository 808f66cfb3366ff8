// The synthetic full-shape layer of cuda_layer.h: random device weights and caches, and one step
// of the layer through the backend in the model's order.
#include "bench/cuda_layer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <numeric>
#include <random>
#include <set>

#include "bench/bench_timing.h"
#include "bench/score_ties.h"
#include "engine/ops/cuda/bench_support.h"

namespace flashdesk::bench {
namespace {

using cuda_bench::Fill;
using cuda_bench::FillSpec;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Random residual streams in the backend's storage, BF16 values either way as the model's are
// (F32 streams of other values would send the mixes through their three-plane path).
FillSpec stream_fill(DType storage, uint64_t seed) {
  return FillSpec{storage == DType::BF16 ? Fill::Bf16 : Fill::Bf16InF32, seed, -1.0f, 1.0f};
}

}  // namespace

struct SyntheticLayer::Weights {
  Tensor attn_norm, ffn_norm, q_norm, kv_norm, sink;
  HcParams hc_attn, hc_ffn;
  LinearWeight wq_a, wq_b, wkv, wo_a, wo_b;
  // KV source: the compressor and the index-key projection.
  std::optional<LinearWeight> c_wkv, c_wgate, index_wk;
  Tensor c_norm, index_k_norm;
  // Index source: the indexer's query and head-weight projections.
  std::optional<LinearWeight> i_wq_b, i_weights_proj;
  LinearWeight gate;
  Tensor bias;
  std::vector<ExpertWeights> experts;
  std::vector<const ExpertWeights*> expert_ptrs;  // stable, like MoeWeights::experts
  std::deque<std::vector<uint8_t>> host_bytes;    // routed experts left in host memory (hybrid)
  std::optional<ExpertWeights> shared;
  double fixed_bytes = 0, expert_bytes = 0;  // per routed expert
};

struct SyntheticLayer::SeqCache {
  Tensor ring;  // [W, window row]
  std::vector<int64_t> ring_positions;
  Tensor entries, keys;  // global KV of the layer's KV source
  int64_t n_entries = 0;
  Tensor pending_kv, pending_score;
  int64_t n_pending = 0;
  Tensor reuse_topk;    // Reuse: the index source's top-k [rows, k]
  Tensor restrict_ids;  // Reindex: the candidate source's blocks [rows, C]
};

namespace {

class WeightMaker {
 public:
  WeightMaker(CudaBackend& be, uint64_t seed) : be_(be), seed_(seed) {}

  Tensor tensor(DType dt, Shape s, FillSpec f) {
    Tensor t = be_.alloc(dt, s);
    f.seed = ++seed_;
    cuda_bench::fill(be_, t, f);
    bytes_ += static_cast<double>(t.nbytes());
    return t;
  }
  Tensor vec(int64_t n, float lo, float hi) {
    return tensor(DType::F32, Shape{n}, FillSpec{Fill::F32, 0, lo, hi});
  }
  LinearWeight fp8(int64_t out, int64_t in, const char* name) {
    LinearWeight w{WeightFormat::Fp8Block, out, in, 32, {}, {}, name};
    w.data = tensor(DType::F8_E4M3, Shape{out, in}, FillSpec{Fill::Fp8Codes});
    w.scale = tensor(DType::F8_E8M0, Shape{ceil_div(out, 32), ceil_div(in, 32)},
                     FillSpec{Fill::E8m0Scales, 0, 0, 0, -9});
    return w;
  }
  LinearWeight fp4(int64_t out, int64_t in, const char* name) {
    LinearWeight w{WeightFormat::Fp4Row, out, in, 32, {}, {}, name};
    w.data = tensor(DType::I8, Shape{out, in / 2}, FillSpec{Fill::RandomBytes});
    w.scale = tensor(DType::F8_E8M0, Shape{out, in / 32}, FillSpec{Fill::E8m0Scales, 0, 0, 0, -4});
    return w;
  }
  LinearWeight bf16(int64_t out, int64_t in, const char* name) {
    LinearWeight w{WeightFormat::Bf16, out, in, 32, {}, {}, name};
    w.data = tensor(DType::BF16, Shape{out, in}, FillSpec{Fill::Bf16, 0, -0.02f, 0.02f});
    return w;
  }
  HcParams hc(int64_t hc, int64_t d) {
    const int64_t mixes = (2 + hc) * hc;
    return {tensor(DType::F32, Shape{mixes, hc * d}, FillSpec{Fill::F32, 0, -0.01f, 0.01f}),
            vec(mixes, -0.5f, 0.5f), vec(3, 0.5f, 1.5f)};
  }
  double take_bytes() {
    const double b = bytes_;
    bytes_ = 0;
    return b;
  }

 private:
  CudaBackend& be_;
  uint64_t seed_;
  double bytes_ = 0;
};

// A routed expert's FP4 linear in host memory, left there by upload_linear (the hybrid
// placement: the CUDA backend computes it on the CPU): random codes and UE8M0 scales spread as
// WeightMaker's device fills spread them. `keep` holds the bytes as long as the layer.
LinearWeight host_fp4(CudaBackend& be, std::deque<std::vector<uint8_t>>& keep, int64_t out,
                      int64_t in, uint64_t seed, const char* name) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {  // xorshift64*: gigabytes of bytes in about a second
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
  };
  std::vector<uint8_t>& data = keep.emplace_back(static_cast<size_t>(out * in / 2));
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    const uint64_t v = next();
    std::memcpy(data.data() + i, &v, 8);
  }
  std::vector<uint8_t>& scale = keep.emplace_back(static_cast<size_t>(out * (in / 32)));
  for (uint8_t& b : scale) b = static_cast<uint8_t>(127 - 4 + static_cast<int>(next() % 5) - 2);
  const std::array<int64_t, 2> ws = {out, in / 2}, ss = {out, in / 32};
  const TensorView w{name, DType::I8, ws, data.data(), data.size()};
  const TensorView sv{name, DType::F8_E8M0, ss, scale.data(), scale.size()};
  return be.upload_linear(w, &sv, /*in_host=*/true);
}

}  // namespace

SyntheticLayer::SyntheticLayer(CudaBackend& be, const TextConfig& text, const LayerRole& role,
                               int64_t seqs, int64_t context, uint64_t seed, bool host_experts)
    : be_(be),
      t_(text),
      role_(role),
      seqs_(seqs),
      context_(context),
      w_(std::make_unique<Weights>()) {
  const int64_t D = t_.hidden_size, H = t_.num_attention_heads, hd = t_.head_dim;
  const int64_t q = t_.q_lora_rank, G = t_.o_groups, inter = t_.moe_intermediate_size;
  WeightMaker mk(be_, seed);
  Weights& w = *w_;
  w.attn_norm = mk.vec(D, 0.5f, 1.5f);
  w.ffn_norm = mk.vec(D, 0.5f, 1.5f);
  w.hc_attn = mk.hc(t_.hc_mult, D);
  w.hc_ffn = mk.hc(t_.hc_mult, D);
  w.wq_a = mk.fp8(q, D, "wq_a");
  w.q_norm = mk.vec(q, 0.5f, 1.5f);
  w.wq_b = mk.fp8(H * hd, q, "wq_b");
  w.wkv = mk.fp8(hd, D, "wkv");
  w.kv_norm = mk.vec(hd, 0.5f, 1.5f);
  w.wo_a = mk.fp8(G * t_.o_lora_rank, H / G * hd, "wo_a");
  w.wo_b = mk.fp8(D, G * t_.o_lora_rank, "wo_b");
  w.sink = mk.vec(H, -1.0f, 1.0f);
  const int64_t m = role_.compress_ratio;
  if (role_.compress_ratio > 0 && role_.kv_source == role_.layer) {
    w.c_wkv = mk.bf16(hd, D, "compressor.wkv");
    if (m > 1) w.c_wgate = mk.bf16(hd, D, "compressor.wgate");
    w.c_norm = mk.vec(hd, 0.5f, 1.5f);
    w.index_wk = mk.bf16(t_.index_head_dim, hd, "indexer.wk");
    w.index_k_norm = mk.vec(t_.index_head_dim, 0.5f, 1.5f);
  }
  if (role_.compress_ratio > 0 && role_.index_source == role_.layer) {
    w.i_wq_b = mk.fp8(t_.index_n_heads * t_.index_head_dim, q, "indexer.wq_b");
    w.i_weights_proj = mk.bf16(t_.index_n_heads, D, "indexer.weights_proj");
  }
  w.gate = mk.bf16(t_.n_routed_experts, D, "gate");
  w.bias = mk.vec(t_.n_routed_experts, -0.1f, 0.1f);
  if (t_.n_shared_experts > 0)
    w.shared = ExpertWeights{mk.fp8(inter, D, "shared.w1"), mk.fp8(inter, D, "shared.w3"),
                             mk.fp8(D, inter, "shared.w2")};
  w.fixed_bytes = mk.take_bytes();
  for (int64_t e = 0; e < t_.n_routed_experts; ++e) {
    if (host_experts) {
      const uint64_t s = seed * 1000 + static_cast<uint64_t>(3 * e);
      w.experts.push_back(ExpertWeights{host_fp4(be_, w.host_bytes, inter, D, s, "w1"),
                                        host_fp4(be_, w.host_bytes, inter, D, s + 1, "w3"),
                                        host_fp4(be_, w.host_bytes, D, inter, s + 2, "w2")});
    } else {
      w.experts.push_back(
          ExpertWeights{mk.fp4(inter, D, "w1"), mk.fp4(inter, D, "w3"), mk.fp4(D, inter, "w2")});
    }
  }
  w.expert_bytes = host_experts ? 3.0 * static_cast<double>(inter * D / 2 + inter * D / 32)
                                : mk.take_bytes() / static_cast<double>(t_.n_routed_experts);
  for (const ExpertWeights& e : w.experts) w.expert_ptrs.push_back(&e);
  for (int64_t s = 0; s < seqs_; ++s) caches_.push_back(make_cache(context_, 1, seed + 100 + s));
  for (int k = 0; k < 4; ++k) {
    inputs_.push_back(mk.tensor(be_.stream_dtype(), Shape{seqs_, t_.hc_mult, D},
                                stream_fill(be_.stream_dtype(), 0)));
    pre_in_.push_back(
        mk.tensor(DType::F32, Shape{seqs_, t_.hc_mult}, FillSpec{Fill::F32, 0, 0.1f, 0.5f}));
  }
  for (int k = 0; k < 4; ++k) {
    attn_in_.push_back(be_.alloc(DType::F32, Shape{seqs_, D}));
    be_.hc_collapse_norm(inputs_[static_cast<size_t>(k)], pre_in_[static_cast<size_t>(k)],
                         w.attn_norm, static_cast<float>(t_.rms_norm_eps), attn_in_.back());
  }
  for (int64_t i = 0; i < t_.qk_rope_head_dim / 2; ++i)
    inv_freq_.push_back(
        static_cast<float>(std::pow(10000.0, -2.0 * double(i) / double(t_.qk_rope_head_dim))));
  be_.synchronize();
}

SyntheticLayer::~SyntheticLayer() = default;

// The caches a sequence at `context` positions has for this layer: a full window ring, the KV
// source's entries and keys, and the top-k (Reuse) or candidate blocks (Reindex) of `rows`
// queries that the layer's sources produced earlier in the step.
std::unique_ptr<SyntheticLayer::SeqCache> SyntheticLayer::make_cache(int64_t context, int64_t rows,
                                                                     uint64_t seed) {
  auto c = std::make_unique<SeqCache>();
  const int64_t W = t_.sliding_window, hd = t_.head_dim, m = role_.compress_ratio;
  c->ring = be_.alloc(DType::U8, Shape{W, kv_row_bytes(KvFormat::Fp8Window, hd)});
  cuda_bench::fill(be_, c->ring, FillSpec{Fill::WindowRows, seed, 0, 0, -6, hd});
  c->ring_positions.assign(static_cast<size_t>(W), -1);
  for (int64_t p = std::max<int64_t>(0, context - W); p < context; ++p)
    c->ring_positions[static_cast<size_t>(p % W)] = p;
  if (m == 0) return c;
  c->n_entries = context / m;
  const int64_t cap = std::max<int64_t>(1, (context + rows) / m + 8);
  c->entries = be_.alloc(DType::U8, Shape{cap, kv_row_bytes(KvFormat::Fp4Entry, hd)});
  cuda_bench::fill(be_, c->entries, FillSpec{Fill::EntryRows, seed + 1, 0, 0, 0, hd});
  c->keys = be_.alloc(DType::U8, Shape{cap, kv_row_bytes(KvFormat::Fp4Key, t_.index_head_dim)});
  cuda_bench::fill(be_, c->keys, FillSpec{Fill::KeyRows, seed + 2, 0, 0, -3, t_.index_head_dim});
  c->pending_kv = be_.zeros(DType::F32, Shape{std::max<int64_t>(m, 1), hd});
  c->pending_score = be_.zeros(DType::F32, Shape{std::max<int64_t>(m, 1), hd});
  std::mt19937 rng(static_cast<uint32_t>(seed));
  // Entries visible to query r (position context + r, or r in a prefill from 0).
  auto visible = [&](int64_t r) { return (context + r + 1) / m; };
  const int64_t entries_end = std::max<int64_t>(1, (context + rows) / m);
  if (role_.index_source != role_.layer) {  // Reuse: the index source's top-k
    const int64_t k = std::min(t_.index_topk, entries_end);
    std::vector<int32_t> ids(static_cast<size_t>(rows * k), -1);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k && j < visible(r); ++j)
        ids[static_cast<size_t>(r * k + j)] = static_cast<int32_t>(rng() % visible(r));
    c->reuse_topk = be_.alloc(DType::I32, Shape{rows, k});
    be_.write(c->reuse_topk, ids.data(), ids.size() * 4);
  }
  if (role_.candidate_source >= 0 && !role_.builds_candidates) {  // Reindex: candidate blocks
    const int64_t blocks = ceil_div(entries_end, t_.candidate_block_size);
    const int64_t C = std::min(t_.candidate_topk_blocks, blocks);
    std::vector<int32_t> ids(static_cast<size_t>(rows * C));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < C; ++j)
        ids[static_cast<size_t>(r * C + j)] = static_cast<int32_t>(rng() % blocks);
    c->restrict_ids = be_.alloc(DType::I32, Shape{rows, C});
    be_.write(c->restrict_ids, ids.data(), ids.size() * 4);
  }
  return c;
}

void SyntheticLayer::compress(const Tensor& x, std::vector<SeqCache*>& seqs,
                              int64_t first_position) {
  const Weights& w = *w_;
  const int64_t m = role_.compress_ratio, hd = t_.head_dim, d_ih = t_.index_head_dim;
  const int64_t n = x.rows(), per_seq = n / static_cast<int64_t>(seqs.size());
  const float eps = static_cast<float>(t_.rms_norm_eps);
  Tensor kv = be_.alloc(DType::F32, Shape{n, hd}), score;
  if (m == 1) {
    be_.linear(x, *w.c_wkv, kBf16Linear, kv);
  } else {
    score = be_.alloc(DType::F32, Shape{n, hd});
    be_.linear(x, *w.c_wkv, kF32Linear, kv);
    be_.linear(x, *w.c_wgate, kF32Linear, score);
  }
  for (size_t s = 0; s < seqs.size(); ++s) {
    SeqCache& c = *seqs[s];
    const int64_t first = static_cast<int64_t>(s) * per_seq;
    Tensor latent;
    if (m == 1) {
      latent = kv.rows(first, per_seq);
    } else {
      c.n_pending = (first_position % m);  // the steady state of a decode at this position
      if (per_seq == 1 && c.n_pending == 0) c.n_pending = m - 1;  // a decode that completes a group
      latent = be_.alloc(DType::F32, Shape{(c.n_pending + per_seq) / m, hd});
      be_.compressor_pool(kv.rows(first, per_seq), score.rows(first, per_seq), m, c.pending_kv,
                          c.pending_score, c.n_pending, latent);
    }
    const int64_t e = latent.rows();
    if (e == 0) continue;
    Tensor lat = be_.alloc(DType::F32, Shape{e, hd});
    be_.rms_norm(latent, &w.c_norm, eps, lat);
    std::vector<int64_t> pos(static_cast<size_t>(e));
    const int64_t at = first_position / m;  // entries are written, not appended: steps repeat
    for (int64_t j = 0; j < e; ++j) pos[static_cast<size_t>(j)] = (at + j) * m;
    Tensor k = be_.alloc(DType::F32, Shape{e, d_ih});
    be_.linear(lat, *w.index_wk, kBf16Linear, k);
    be_.rope_quantize_rows(k, &w.index_k_norm, eps, pos, inv_freq_, KvFormat::Fp4Key, c.keys, at);
    be_.rope_quantize_rows(lat, nullptr, eps, pos, inv_freq_, KvFormat::Fp4Entry, c.entries, at);
  }
}

std::vector<Tensor> SyntheticLayer::index(const Tensor& qr, const Tensor& x,
                                          std::span<const int64_t> positions,
                                          std::vector<SeqCache*>& seqs, int64_t first_position,
                                          std::vector<Tensor>& candidates) {
  const Weights& w = *w_;
  const int64_t n = x.rows(), n_ih = t_.index_n_heads, d_ih = t_.index_head_dim;
  const int64_t m = role_.compress_ratio, per_seq = n / static_cast<int64_t>(seqs.size());
  Tensor qi = be_.alloc(DType::F32, Shape{n, n_ih, d_ih});
  be_.linear(qr, *w.i_wq_b, kQuantLinear, qi);
  be_.rope(qi, d_ih, positions, inv_freq_, false);
  be_.fake_quant_fp4_e8m0(qi, 32);
  Tensor wt = be_.alloc(DType::F32, Shape{n, n_ih});
  be_.linear(x, *w.i_weights_proj, kBf16Linear, wt);
  // As StepRunner::index: bf16(w * float(d_ih^-1/2 * n_ih^-1/2)), the constant formed in double.
  be_.scale(wt, static_cast<float>(std::pow(static_cast<double>(d_ih), -0.5) *
                                   std::pow(static_cast<double>(n_ih), -0.5)));
  be_.round_bf16(wt);
  const bool restricted = role_.candidate_source >= 0 && !role_.builds_candidates;
  std::vector<Tensor> topk;
  for (size_t s = 0; s < seqs.size(); ++s) {
    SeqCache& c = *seqs[s];
    const int64_t first = static_cast<int64_t>(s) * per_seq;
    const int64_t entries = std::max(c.n_entries, (first_position + per_seq) / m);
    std::vector<int64_t> visible(static_cast<size_t>(per_seq));
    for (int64_t j = 0; j < per_seq; ++j)
      visible[static_cast<size_t>(j)] = (first_position + j + 1) / m;
    const Tensor q_s = qi.rows(first, per_seq), w_s = wt.rows(first, per_seq);
    IndexerArgs a;
    a.q = &q_s;
    a.weights = &w_s;
    a.n_visible = visible;
    a.keys = EntryCache{&c.keys, entries};
    a.block_size = t_.candidate_block_size;
    if (restricted) a.restrict_blocks = &c.restrict_ids;
    Tensor tk = be_.alloc(DType::I32, Shape{per_seq, std::min(t_.index_topk, entries)});
    Tensor cand;
    if (role_.builds_candidates)
      cand = be_.alloc(DType::I32, Shape{per_seq, std::min(t_.candidate_topk_blocks,
                                                           ceil_div(entries, a.block_size))});
    be_.indexer_select(a, tk, role_.builds_candidates ? &cand : nullptr);
    if (probe_ && s == 0) probe_row(a, tk, cand, entries);
    topk.push_back(tk);
    candidates.push_back(cand);
  }
  return topk;
}

Tensor SyntheticLayer::attention(const Tensor& x, std::span<const int64_t> positions,
                                 std::vector<SeqCache*>& seqs, int64_t first_position, bool prefill,
                                 const std::function<void()>& after_sections) {
  const Weights& w = *w_;
  const int64_t n = x.rows(), D = t_.head_dim, H = t_.num_attention_heads;
  const int64_t per_seq = n / static_cast<int64_t>(seqs.size()), W = t_.sliding_window;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  // As project_attention_inputs: the key/value row beside the query's linears, and where the
  // backend asks for it (as attention_layer.cpp) the compressor in that section and the indexer
  // in one of its own after the query latent.
  const bool beside = w.i_wq_b.has_value() && be_.indexer_beside_query(n);
  std::vector<Tensor> topk, candidates;
  be_.beside_begin();
  Tensor kv = be_.alloc(DType::F32, Shape{n, D});
  be_.linear(x, w.wkv, kQuantLinear, kv);
  Tensor step_kv = be_.alloc(DType::U8, Shape{n, kv_row_bytes(KvFormat::Fp8Window, D)});
  be_.rope_quantize_rows(kv, &w.kv_norm, eps, positions, inv_freq_, KvFormat::Fp8Window, step_kv,
                         0);
  if (beside && w.c_wkv) compress(x, seqs, first_position);
  const Backend::Beside kv_section = be_.beside_end();
  if (!beside) after_sections();
  Tensor qr = be_.alloc(DType::F32, Shape{n, t_.q_lora_rank});
  be_.linear(x, w.wq_a, kQuantLinear, qr);
  be_.rms_norm(qr, &w.q_norm, eps, qr);
  Backend::Beside index_section;
  if (beside) {
    be_.beside_begin();
    topk = index(qr, x, positions, seqs, first_position, candidates);
    index_section = be_.beside_end();
    after_sections();
  }
  Tensor q = be_.alloc(DType::F32, Shape{n, H, D});
  be_.linear(qr, w.wq_b, kQuantLinear, q);
  be_.rope(q, D, positions, inv_freq_, false);
  be_.join(kv_section);
  be_.join(index_section);
  if (!beside) {
    if (w.c_wkv) compress(x, seqs, first_position);
    if (w.i_wq_b) topk = index(qr, x, positions, seqs, first_position, candidates);
  }
  Tensor o = be_.alloc(DType::F32, Shape{n, H, D});
  for (size_t s = 0; s < seqs.size(); ++s) {
    SeqCache& c = *seqs[s];
    const int64_t first = static_cast<int64_t>(s) * per_seq;
    const Tensor q_s = q.rows(first, per_seq), kv_s = step_kv.rows(first, per_seq);
    Tensor o_s = o.rows(first, per_seq);
    std::vector<int64_t> ring_positions = c.ring_positions;
    if (prefill) std::fill(ring_positions.begin(), ring_positions.end(), -1);
    AttentionArgs a;
    a.q = &q_s;
    a.positions = positions.subspan(static_cast<size_t>(first), static_cast<size_t>(per_seq));
    a.window = WindowKv{&c.ring, ring_positions, &kv_s, first_position, W};
    a.sink = &w.sink;
    a.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    if (role_.compress_ratio > 0) {
      const int64_t entries =
          std::max(c.n_entries, (first_position + per_seq) / role_.compress_ratio);
      a.compressed = EntryCache{&c.entries, entries};
      a.topk = topk.empty() ? &c.reuse_topk : &topk[s];
    }
    be_.sparse_attention_unrotated(a, inv_freq_, o_s);  // as attention_layer.cpp, unobserved
    std::vector<int64_t> src, slots;                    // the last min(n, W) rows enter the ring
    for (int64_t j = std::max<int64_t>(0, per_seq - W); j < per_seq; ++j) {
      src.push_back(j);
      slots.push_back((first_position + j) % W);
    }
    be_.scatter_rows(kv_s, src, c.ring, slots);
  }
  Tensor z = be_.alloc(DType::F32, Shape{n, w.wo_a.out});
  be_.grouped_linear(o, w.wo_a, w.wo_a.out / t_.o_lora_rank, z);
  Tensor a = be_.alloc(DType::F32, Shape{n, t_.hidden_size});
  be_.linear(z, w.wo_b, kQuantLinear,
             a);  // one device: rounded by the linear (attention_layer.cpp)
  return a;
}

void SyntheticLayer::route(const Tensor& x, Tensor& ids, Tensor& weights) {
  const int64_t n = x.rows(), k = t_.num_experts_per_tok;
  Tensor logits = be_.alloc(DType::F32, Shape{n, t_.n_routed_experts});
  be_.linear(x, w_->gate, kF32Linear, logits);
  ids = be_.alloc(DType::I32, Shape{n, k});
  weights = be_.alloc(DType::F32, Shape{n, k});
  const RouteSettings rs{k, static_cast<float>(t_.gate_temp),
                         static_cast<float>(t_.routed_scaling_factor), t_.norm_topk_prob};
  be_.moe_route(logits, w_->bias, nullptr, {}, rs, ids, weights);
}

size_t SyntheticLayer::distinct_experts(const Tensor& ids) {
  std::vector<int32_t> host(static_cast<size_t>(ids.numel()));
  be_.read(ids, host.data(), host.size() * 4);
  return std::set<int32_t>(host.begin(), host.end()).size();
}

Tensor SyntheticLayer::moe(const Tensor& x, Tensor* ids_out) {
  const Weights& w = *w_;
  const int64_t n = x.rows();
  const float limit = static_cast<float>(t_.swiglu_limit);
  const bool ahead = w.shared && be_.shared_expert_beside_router(*w.shared, n);  // as ffn_layer.cpp
  Tensor shared_y;
  Backend::Beside shared_done;
  if (ahead) {
    shared_y = be_.alloc(DType::F32, Shape{n, t_.hidden_size});
    be_.beside_begin();
    be_.moe_shared_expert(x, *w.shared, limit, shared_y);
    shared_done = be_.beside_end();
  }
  Tensor ids, weights;
  route(x, ids, weights);
  Tensor y = be_.alloc(DType::F32, Shape{n, t_.hidden_size});
  if (ahead) {
    be_.join(shared_done);
    be_.moe_routed_experts_plus(x, ids, weights, w.expert_ptrs, shared_y, limit, y);
    be_.round_bf16(y);
  } else {  // one device: rounded where the sums are made (StepRunner::moe)
    be_.moe_experts_rounded(x, ids, weights, w.expert_ptrs, w.shared ? &*w.shared : nullptr, limit,
                            y);
  }
  if (ids_out) *ids_out = ids;
  return y;
}

Tensor SyntheticLayer::step(const Tensor& X, const Tensor& u, std::span<const int64_t> positions,
                            std::vector<SeqCache*>& seqs, int64_t first_position, bool prefill) {
  const Weights& w = *w_;
  const int64_t n = X.rows(), hc = t_.hc_mult, D = t_.hidden_size;
  const float eps = static_cast<float>(t_.rms_norm_eps);
  const HcSettings hs{hc, eps, static_cast<float>(t_.hc_eps), t_.hc_sinkhorn_iters};
  auto f32 = [&](Shape s) { return be_.alloc(DType::F32, s); };
  Tensor pre_a = f32(Shape{n, hc}), post_a = f32(Shape{n, hc}), comb_a = f32(Shape{n, hc, hc});
  // The mixes after the beside sections the attention joins, as StepRunner::run_block.
  Backend::Beside mixes;
  Tensor a = attention(u, positions, seqs, first_position, prefill, [&] {
    mixes = be_.hc_mixes_beside(X, w.hc_attn, hs, pre_a, post_a, comb_a);
  });
  be_.join(mixes);
  auto streams = [&](Shape s) { return be_.alloc(be_.stream_dtype(), s); };
  Tensor X1 = streams(Shape{n, hc, D}), u2 = f32(Shape{n, D});
  be_.hc_expand_collapse_norm(X, a, post_a, comb_a, pre_a, w.ffn_norm, eps, X1, u2);
  Tensor pre_f = f32(Shape{n, hc}), post_f = f32(Shape{n, hc}), comb_f = f32(Shape{n, hc, hc});
  mixes = be_.hc_mixes_beside(X1, w.hc_ffn, hs, pre_f, post_f, comb_f);
  Tensor y = moe(u2, nullptr);
  be_.join(mixes);
  // The next block's input with the streams (StepRunner::run_block): this layer's norm stands in
  // for the next one's.
  Tensor X2 = streams(Shape{n, hc, D}), next_u = f32(Shape{n, D});
  be_.hc_expand_collapse_norm(X1, y, post_f, comb_f, pre_f, w.attn_norm, eps, X2, next_u);
  return X2;
}

void SyntheticLayer::decode(int input) {
  std::vector<int64_t> positions(static_cast<size_t>(seqs_), context_);
  std::vector<SeqCache*> seqs;
  for (auto& c : caches_) seqs.push_back(c.get());
  const size_t i = static_cast<size_t>(input % 4);
  step(inputs_[i], attn_in_[i], positions, seqs, context_, false);
}

void SyntheticLayer::prefill(int64_t tokens) {
  const int64_t hc = t_.hc_mult, D = t_.hidden_size;
  if (!prefill_cache_ || prefill_tokens_ != tokens) {
    prefill_cache_ = make_cache(0, tokens, 999);
    prefill_tokens_ = tokens;
    prefill_x_ = be_.alloc(be_.stream_dtype(), Shape{tokens, hc, D});
    cuda_bench::fill(be_, prefill_x_, stream_fill(be_.stream_dtype(), 5));
    prefill_pre_ = be_.alloc(DType::F32, Shape{tokens, hc});
    cuda_bench::fill(be_, prefill_pre_, FillSpec{Fill::F32, 6, 0.1f, 0.5f});
    prefill_u_ = be_.alloc(DType::F32, Shape{tokens, D});
    be_.hc_collapse_norm(prefill_x_, prefill_pre_, w_->attn_norm,
                         static_cast<float>(t_.rms_norm_eps), prefill_u_);
  }
  SeqCache& c = *prefill_cache_;
  c.ring_positions.assign(c.ring_positions.size(), -1);  // an empty sequence again
  c.n_entries = 0;
  c.n_pending = 0;
  std::vector<SeqCache*> seqs = {&c};
  std::vector<int64_t> positions(static_cast<size_t>(tokens));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  step(prefill_x_, prefill_u_, positions, seqs, 0, true);
}

void SyntheticLayer::probe_row(const IndexerArgs& a, Tensor& topk, Tensor& candidates,
                               int64_t entries) {
  const Tensor scores = be_.indexer_scores(a);
  std::vector<float>& row = probe_->row;
  row.resize(static_cast<size_t>(scores.dim(1)));
  be_.read(scores, row.data(), row.size() * sizeof(float));
  probe_->tie = kth_tie(row, std::min<int64_t>(t_.index_topk, entries));
  if (probe_reps_ <= 0) return;
  std::vector<double> op_ms, scores_ms;
  Tensor* cand = candidates.defined() ? &candidates : nullptr;
  for (int64_t rep = -1; rep < probe_reps_; ++rep) {  // rep -1: untimed warm-up
    const double op = cuda_bench::device_ms(be_, [&] { be_.indexer_select(a, topk, cand); });
    const double sc = cuda_bench::device_ms(be_, [&] { (void)be_.indexer_scores(a); });
    if (rep < 0) continue;
    op_ms.push_back(op);
    scores_ms.push_back(sc);
  }
  probe_->op_us = median(op_ms) * 1e3;
  probe_->scores_us = median(scores_ms) * 1e3;
}

SyntheticLayer::IndexProbe SyntheticLayer::index_probe(int input, int64_t reps) {
  IndexProbe probe;
  probe_ = &probe;
  probe_reps_ = reps;
  decode(input);
  probe_ = nullptr;
  be_.synchronize();
  return probe;
}

StepBytes SyntheticLayer::decode_bytes(int input) {
  const Tensor& X = inputs_[static_cast<size_t>(input % 4)];
  // The routed experts of this input: the same ffn input as a decode step makes.
  const int64_t D = t_.hidden_size, n = X.rows();
  Tensor u = be_.alloc(DType::F32, Shape{n, D});
  be_.hc_collapse_norm(X, pre_in_[static_cast<size_t>(input % 4)], w_->ffn_norm,
                       static_cast<float>(t_.rms_norm_eps), u);
  Tensor ids;
  moe(u, &ids);
  StepBytes b;
  b.fixed = w_->fixed_bytes;
  b.experts = w_->expert_bytes * static_cast<double>(distinct_experts(ids));
  const int64_t hd = t_.head_dim;
  for (const auto& c : caches_) {
    b.caches += static_cast<double>(c->ring.nbytes());
    if (role_.compress_ratio == 0) continue;
    b.caches += static_cast<double>(std::min(t_.index_topk, c->n_entries) *
                                    kv_row_bytes(KvFormat::Fp4Entry, hd));
    if (w_->i_wq_b)
      b.caches +=
          static_cast<double>(c->n_entries * kv_row_bytes(KvFormat::Fp4Key, t_.index_head_dim));
  }
  return b;
}

void SyntheticLayer::route_for_weights_only() {
  const Weights& w = *w_;
  for (size_t i = 0; i < 4; ++i) {
    Tensor ids, weights;
    route(attn_in_[i], ids, weights);
    double bytes = w.expert_bytes * static_cast<double>(distinct_experts(ids));
    for (const LinearWeight* l : {&w.wq_a, &w.wq_b, &w.wkv, &w.wo_a, &w.wo_b, &w.gate})
      bytes += static_cast<double>(l->data.nbytes() + (l->scale.defined() ? l->scale.nbytes() : 0));
    if (w.shared)
      for (const LinearWeight* l : {&w.shared->w1, &w.shared->w3, &w.shared->w2})
        bytes += static_cast<double>(l->data.nbytes() + l->scale.nbytes());
    wo_ids_.push_back(ids);
    wo_weights_.push_back(weights);
    wo_bytes_.push_back(bytes);
  }
  const int64_t n = attn_in_[0].rows();
  wo_heads_ = be_.alloc(DType::F32, Shape{n, t_.num_attention_heads, t_.head_dim});
  cuda_bench::fill(be_, wo_heads_, FillSpec{Fill::Bf16InF32, 77, -1.0f, 1.0f});
}

void SyntheticLayer::decode_weights_only(int input) {
  if (wo_ids_.empty()) route_for_weights_only();
  const Weights& w = *w_;
  const size_t i = static_cast<size_t>(input % 4);
  const Tensor& x = attn_in_[i];
  const int64_t n = x.rows(), D = t_.head_dim, H = t_.num_attention_heads;
  be_.beside_begin();
  Tensor kv = be_.alloc(DType::F32, Shape{n, D});
  be_.linear(x, w.wkv, kQuantLinear, kv);
  const Backend::Beside kv_section = be_.beside_end();
  Tensor qr = be_.alloc(DType::F32, Shape{n, t_.q_lora_rank});
  be_.linear(x, w.wq_a, kQuantLinear, qr);
  Tensor q = be_.alloc(DType::F32, Shape{n, H, D});
  be_.linear(qr, w.wq_b, kQuantLinear, q);
  be_.join(kv_section);
  Tensor z = be_.alloc(DType::F32, Shape{n, w.wo_a.out});
  be_.grouped_linear(wo_heads_, w.wo_a, w.wo_a.out / t_.o_lora_rank, z);
  Tensor a = be_.alloc(DType::F32, Shape{n, t_.hidden_size});
  be_.linear(z, w.wo_b, kQuantLinear, a);
  Tensor logits = be_.alloc(DType::F32, Shape{n, t_.n_routed_experts});
  be_.linear(x, w.gate, kF32Linear, logits);
  Tensor y = be_.alloc(DType::F32, Shape{n, t_.hidden_size});
  be_.moe_experts_rounded(x, wo_ids_[i], wo_weights_[i], w.expert_ptrs,
                          w.shared ? &*w.shared : nullptr, static_cast<float>(t_.swiglu_limit), y);
}

double SyntheticLayer::weights_only_bytes(int input) {
  if (wo_ids_.empty()) route_for_weights_only();
  return wo_bytes_[static_cast<size_t>(input % 4)];
}

double SyntheticLayer::prefill_flops(int64_t tokens) const {
  const Weights& w = *w_;
  double params = 0;
  for (const LinearWeight* l : {&w.wq_a, &w.wq_b, &w.wkv, &w.wo_a, &w.wo_b, &w.gate})
    params += static_cast<double>(l->out * l->in);
  for (const auto* l : {&w.c_wkv, &w.c_wgate, &w.i_wq_b, &w.i_weights_proj})
    if (*l) params += static_cast<double>((*l)->out * (*l)->in);
  const double expert = 3.0 * static_cast<double>(t_.moe_intermediate_size * t_.hidden_size);
  params += expert * static_cast<double>(t_.num_experts_per_tok + t_.n_shared_experts);
  // Attention: q.k and p.v over the window and the top-k for every head.
  const double keys =
      static_cast<double>(t_.sliding_window + (role_.compress_ratio ? t_.index_topk : 0));
  const double attn = 4.0 * static_cast<double>(t_.num_attention_heads * t_.head_dim) * keys;
  return static_cast<double>(tokens) * (2.0 * params + attn);
}

}  // namespace flashdesk::bench
