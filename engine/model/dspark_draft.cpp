// The DSpark draft forward (docs/dspark.md). Numerics follow the main blocks (docs/numerics.md):
// the same linears, norms, RoPE, FP8 window KV, sparse attention and MoE ops; the exact steps after
// the head (the Markov bias added to the FP32 logits, the argmax, the confidence input's
// concatenation) are backend ops too, so a greedy draft stays on the backend until one read-back.
#include "engine/model/dspark_draft.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/model/attention_inputs.h"
#include "engine/model/model_weights.h"
#include "engine/model/rope_freqs.h"

namespace flashdesk {
namespace {

const DsparkWeights& dspark_weights(const ModelWeights& w) {
  if (!w.dspark) throw InvalidRequest("the model has no DSpark draft head (or runs on >1 device)");
  return *w.dspark;
}

size_t aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

}  // namespace

// A draft's outputs on the backend: views into one allocation, so that one read brings back what
// the caller needs, at 256-byte offsets (kernels' vector accesses stay aligned):
//   [logits B x V F32 | confidence B F32 | chain B + 1 I32]
// chain[0] is the last target token, chain[i + 1] row i's draft: each Markov row reads the token
// before it from there, where the previous row's argmax (or the picker's choice) was written.
struct DsparkDrafter::Results {
  Tensor all;         // U8, the allocation
  Tensor logits;      // [B, V] F32, Markov-corrected in place row by row
  Tensor confidence;  // [B, 1] F32
  Tensor chain;       // [B + 1] I32
  Tensor embeds;      // [B, rank] F32: row i's Markov embedding (of chain[i]), not read back
  size_t confidence_at = 0, chain_at = 0;  // byte offsets in `all`
};

DsparkDrafter::DsparkDrafter(Model& model)
    : model_(model),
      be_(model.backend_),
      text_(model.config().text),
      w_(dspark_weights(*model.weights_)),
      rope_(rope_inv_freq(model.config().text, 0)) {}

bool DsparkDrafter::available(const Model& model) {
  return model.weights_->dspark.has_value();
}

int64_t DsparkDrafter::block_size() const {
  return text_.dspark_block_size;
}

DraftState DsparkDrafter::new_state() const {
  const int64_t W = text_.sliding_window;
  DraftState s;
  for (size_t m = 0; m < w_.stages.size(); ++m)
    s.rings.push_back(WindowRing{
        be_.zeros(DType::U8, Shape{W, kv_row_bytes(KvFormat::Fp8Window, text_.head_dim)}),
        std::vector<int64_t>(static_cast<size_t>(W), -1)});
  return s;
}

void DsparkDrafter::seed(DraftState& state, const Tensor& features, int64_t first) {
  const int64_t T = static_cast<int64_t>(text_.dspark_target_layer_ids.size());
  const int64_t n = features.rows(), dim = text_.hidden_size, D = text_.head_dim;
  const int64_t W = text_.sliding_window;
  const float eps = static_cast<float>(text_.rms_norm_eps);
  FD_CHECK(first >= state.seeded, "DSpark rings must be seeded in position order");
  if (n == 0) return;
  if (first != state.seeded) state.valid_from = first;
  Tensor main_x = f32(Shape{n, dim});
  be_.linear(features.reshaped(Shape{n, T * dim}), w_.main_proj, kQuantLinear, main_x);
  be_.rms_norm(main_x, &w_.main_norm, eps, main_x);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) positions[static_cast<size_t>(j)] = first + j;
  // Only the last W positions can stay in a ring.
  std::vector<int64_t> src, slots;
  for (int64_t j = std::max<int64_t>(0, n - W); j < n; ++j) {
    src.push_back(j);
    slots.push_back((first + j) % W);
  }
  for (size_t m = 0; m < w_.stages.size(); ++m) {
    const AttentionWeights& A = w_.stages[m].attn;
    Tensor kv = f32(Shape{n, D});
    be_.linear(main_x, A.wkv, kQuantLinear, kv);
    Tensor q8 = be_.alloc(DType::U8, Shape{n, kv_row_bytes(KvFormat::Fp8Window, D)});
    be_.rope_quantize_rows(kv, &A.kv_norm, eps, positions, rope_, KvFormat::Fp8Window, q8, 0);
    WindowRing& ring = state.rings[m];
    be_.scatter_rows(q8, src, ring.rows, slots);
    for (size_t i = 0; i < src.size(); ++i)
      ring.positions[static_cast<size_t>(slots[i])] = first + src[i];
  }
  state.seeded = first + n;
}

DraftBlock DsparkDrafter::draft(const DraftState& state, int32_t last, const DraftPicker& pick,
                                DraftLogits logits) {
  FD_CHECK(state.seeded > 0, "a DSpark draft needs at least one seeded target position");
  const Tensor x = run_stages(state, last);
  Results res = results(x.rows());
  Tensor first = res.chain.rows(0, 1);
  be_.write(first, &last, sizeof last);
  DraftBlock out;
  head(x, pick, res, out);
  confidence(x, res);
  read_back(res, !pick && logits == DraftLogits::Kept, out);
  return out;
}

DsparkDrafter::Results DsparkDrafter::results(int64_t B) {
  const int64_t V = text_.vocab_size;
  Results res;
  res.confidence_at = aligned(static_cast<size_t>(B * V) * sizeof(float));
  res.chain_at = res.confidence_at + aligned(static_cast<size_t>(B) * sizeof(float));
  const size_t bytes = res.chain_at + static_cast<size_t>(B + 1) * sizeof(int32_t);
  res.all = be_.alloc(DType::U8, Shape{static_cast<int64_t>(bytes)});
  const auto view = [&](size_t at, DType dtype, Shape shape) {
    return Tensor(res.all.memory(), res.all.byte_offset() + at, dtype, shape);
  };
  res.logits = view(0, DType::F32, Shape{B, V});
  res.confidence = view(res.confidence_at, DType::F32, Shape{B, 1});
  res.chain = view(res.chain_at, DType::I32, Shape{B + 1});
  res.embeds = f32(Shape{B, text_.dspark_markov_rank});
  return res;
}

// The block [last, noise x (B-1)] at positions P ... P+B-1 through every stage, collapsed with
// the last pre-mix: x [B, dim] (bf16 values).
Tensor DsparkDrafter::run_stages(const DraftState& state, int32_t last) {
  const int64_t B = block_size(), hc = text_.hc_mult, dim = text_.hidden_size;
  std::vector<int32_t> ids(static_cast<size_t>(B),
                           static_cast<int32_t>(text_.dspark_noise_token_id));
  ids[0] = last;
  std::vector<int64_t> positions(static_cast<size_t>(B));
  for (int64_t j = 0; j < B; ++j) positions[static_cast<size_t>(j)] = state.seeded + j;
  Tensor rows = f32(Shape{B, dim}), X = f32(Shape{B, hc, dim});
  be_.embed(model_.weights_->embed, ids, rows, X);
  std::vector<float> identity(static_cast<size_t>(B * hc), 0.0f);
  for (int64_t i = 0; i < B; ++i) identity[static_cast<size_t>(i * hc)] = 1.0f;
  Tensor pre = f32(Shape{B, hc});
  be_.write(pre, identity.data(), identity.size() * sizeof(float));
  for (int64_t m = 0; m < static_cast<int64_t>(w_.stages.size()); ++m)
    run_stage(m, state, positions, X, pre);
  Tensor x = f32(Shape{B, dim});
  be_.hc_collapse(X, pre, x);
  return x;
}

// Logits = head(norm(x)) in FP32, then the sequential Markov correction: row i gets the bigram
// bias of the token before it (row 0: of `last`) and its argmax (or the picker's choice) is the
// next draft. Greedy, the rows chain on the backend without a read-back; a picker sees each
// corrected row on the host (one read a row) and its choice is written into the chain.
void DsparkDrafter::head(const Tensor& x, const DraftPicker& pick, Results& res, DraftBlock& out) {
  const int64_t B = x.rows(), dim = text_.hidden_size, V = text_.vocab_size;
  Tensor h = f32(Shape{B, dim});
  be_.rms_norm(x, &w_.norm, static_cast<float>(text_.rms_norm_eps), h);
  be_.linear(h, model_.weights_->head, kF32Linear, res.logits);
  if (pick) out.logits.resize(static_cast<size_t>(B * V));
  for (int64_t i = 0; i < B; ++i) {
    markov_row(i, res);
    if (!pick) continue;
    float* row = out.logits.data() + i * V;
    be_.read(res.logits.rows(i, 1), row, static_cast<size_t>(V) * sizeof(float));
    const int32_t token = pick(i, std::span<const float>(row, static_cast<size_t>(V)));
    Tensor next = res.chain.rows(i + 1, 1);
    be_.write(next, &token, sizeof token);
  }
}

// Row i's Markov correction: markov.embed(chain[i]) [1, rank], its bigram bias markov.head(.) [V]
// added to the row in FP32, the row's argmax written to chain[i + 1].
void DsparkDrafter::markov_row(int64_t i, Results& res) {
  Tensor embed = res.embeds.rows(i, 1), row = res.logits.rows(i, 1);
  Tensor token = res.chain.rows(i, 1), next = res.chain.rows(i + 1, 1);
  be_.embed_rows(w_.markov_embed, token, embed);
  Tensor bias = f32(Shape{1, text_.vocab_size});
  be_.linear(embed, w_.markov_head, kF32Linear, bias);
  be_.add_argmax(row, bias, next);
}

// proj([x_i, markov_embed_i]) in FP32 per row: the confidence head's acceptance logits [B, 1]. The
// joined input is built by a column concat on the backend (exact), not a read-back.
void DsparkDrafter::confidence(const Tensor& x, Results& res) {
  const int64_t B = x.rows(), dim = text_.hidden_size, r = text_.dspark_markov_rank;
  Tensor in = f32(Shape{B, dim + r});
  be_.concat_columns(x, res.embeds, in);
  be_.linear(in, w_.confidence, kF32Linear, res.confidence);
}

// The draft's one read-back: confidences and the chain, and the logits before them when wanted
// (the parts are adjacent, so either is one read).
void DsparkDrafter::read_back(const Results& res, bool with_logits, DraftBlock& out) {
  const int64_t B = res.confidence.rows();
  const size_t from = with_logits ? 0 : res.confidence_at;
  std::vector<uint8_t> host(res.all.nbytes() - from);
  be_.read(res.all.rows(static_cast<int64_t>(from), static_cast<int64_t>(host.size())), host.data(),
           host.size());
  const auto at = [&](size_t offset) { return host.data() + (offset - from); };
  out.confidence.resize(static_cast<size_t>(B));
  std::memcpy(out.confidence.data(), at(res.confidence_at), out.confidence.size() * sizeof(float));
  out.tokens.resize(static_cast<size_t>(B));
  std::memcpy(out.tokens.data(), at(res.chain_at + sizeof(int32_t)),
              out.tokens.size() * sizeof(int32_t));
  if (!with_logits) return;
  out.logits.resize(static_cast<size_t>(res.logits.numel()));
  std::memcpy(out.logits.data(), at(0), out.logits.size() * sizeof(float));
}

Tensor DsparkDrafter::norm_input(const Tensor& X, const Tensor& pre, const Tensor& norm) {
  Tensor u = f32(Shape{X.rows(), text_.hidden_size});
  be_.hc_collapse_norm(X, pre, norm, static_cast<float>(text_.rms_norm_eps), u);
  return u;
}

// One single-pass mHC block, as StepRunner::run_block: attention reads the incoming pre-mix, the
// MoE the attention sublayer's, and the FFN sublayer's pre-mix goes to the next stage.
void DsparkDrafter::run_stage(int64_t stage, const DraftState& state,
                              std::span<const int64_t> positions, Tensor& X, Tensor& pre) {
  const LayerWeights& L = w_.stages[static_cast<size_t>(stage)];
  const int64_t n = X.rows(), hc = text_.hc_mult, dim = text_.hidden_size;
  const HcSettings hs{hc, static_cast<float>(text_.rms_norm_eps), static_cast<float>(text_.hc_eps),
                      text_.hc_sinkhorn_iters};
  Tensor pre_a = f32(Shape{n, hc}), post_a = f32(Shape{n, hc}), comb_a = f32(Shape{n, hc, hc});
  be_.hc_mixes(X, L.hc_attn, hs, pre_a, post_a, comb_a);
  Tensor a = attention(stage, state, positions, norm_input(X, pre, L.attn_norm));
  Tensor X1 = f32(Shape{n, hc, dim}), u = f32(Shape{n, dim});
  be_.hc_expand_collapse_norm(X, a, post_a, comb_a, pre_a, L.ffn_norm,
                              static_cast<float>(text_.rms_norm_eps), X1, u);
  Tensor pre_f = f32(Shape{n, hc}), post_f = f32(Shape{n, hc}), comb_f = f32(Shape{n, hc, hc});
  be_.hc_mixes(X1, L.hc_ffn, hs, pre_f, post_f, comb_f);
  Tensor y = moe(stage, u);
  Tensor X2 = f32(Shape{n, hc, dim});
  be_.hc_expand(X1, y, post_f, comb_f, X2);
  X = X2;
  pre = pre_f;
}

// Window-only attention over the key list of the official DSpark kernel call: the first
// min(W, P) ring slots in slot order, then every row of the block (bidirectional). When seeding
// started late (a reused prefix whose features were never computed), only the seeded slots are
// listed: the drafts are worse, the verified output the same. The list is
// handed to sparse_attention as a ring of W + B slots whose slot i holds list entry i at position
// i, every query at position W + B - 1: each query then sees the whole list, in list order.
Tensor DsparkDrafter::attention(int64_t stage, const DraftState& state,
                                std::span<const int64_t> positions, const Tensor& x) {
  const AttentionWeights& A = w_.stages[static_cast<size_t>(stage)].attn;
  const int64_t n = x.rows(), D = text_.head_dim, H = A.sink.dim(0), W = text_.sliding_window;
  const AttentionInputs in = project_attention_inputs(be_, A, text_, x, positions, rope_);
  const Tensor& q = in.q;

  const int64_t row_bytes = kv_row_bytes(KvFormat::Fp8Window, D);
  // The ring slots in slot order: with the whole window seeded, the first min(W, P) slots.
  const WindowRing& ring = state.rings[static_cast<size_t>(stage)];
  std::vector<int64_t> ring_src;
  for (int64_t slot = 0; slot < W; ++slot)
    if (ring.positions[static_cast<size_t>(slot)] >= state.valid_from) ring_src.push_back(slot);
  const int64_t listed = static_cast<int64_t>(ring_src.size()), slots = W + n;
  Tensor list = be_.zeros(DType::U8, Shape{slots, row_bytes});
  std::vector<int64_t> list_rows, block_src, block_dst;
  for (int64_t i = 0; i < listed; ++i) list_rows.push_back(i);
  for (int64_t j = 0; j < n; ++j) {
    block_src.push_back(j);
    block_dst.push_back(listed + j);
  }
  if (listed > 0) be_.scatter_rows(ring.rows, ring_src, list, list_rows);
  be_.scatter_rows(in.step_kv, block_src, list, block_dst);
  std::vector<int64_t> list_positions(static_cast<size_t>(slots), -1);
  for (int64_t i = 0; i < listed + n; ++i) list_positions[static_cast<size_t>(i)] = i;
  const std::vector<int64_t> query_positions(static_cast<size_t>(n), slots - 1);

  Tensor o = f32(Shape{n, H, D});
  AttentionArgs args;
  args.q = &q;
  args.positions = query_positions;
  args.window = WindowKv{&list, list_positions, nullptr, slots, slots};
  args.sink = &A.sink;
  args.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  be_.sparse_attention(args, o);
  be_.rope(o, D, positions, rope_, true);  // the real positions, not the list's
  const int64_t groups = A.wo_a.out / text_.o_lora_rank;
  Tensor z = f32(Shape{n, A.wo_a.out});
  be_.grouped_linear(o, A.wo_a, groups, z);
  Tensor a = f32(Shape{n, text_.hidden_size});
  // One device: the all-reduce is the identity, and the linear rounds its sums itself (the
  // values of rounding them afterwards, one launch fewer on a GPU).
  be_.linear(z, A.wo_b, kQuantLinear, a);
  return a;
}

Tensor DsparkDrafter::moe(int64_t stage, const Tensor& x) {
  const MoeWeights& M = w_.stages[static_cast<size_t>(stage)].ffn;
  const int64_t n = x.rows(), E = text_.dspark_n_routed_experts;
  const int64_t k = text_.dspark_num_experts_per_tok;
  Tensor logits = f32(Shape{n, E});
  be_.linear(x, M.gate, kF32Linear, logits);
  Tensor ids = be_.alloc(DType::I32, Shape{n, k}), weights = f32(Shape{n, k});
  const RouteSettings rs{k, static_cast<float>(text_.gate_temp),
                         static_cast<float>(text_.routed_scaling_factor), text_.norm_topk_prob};
  be_.moe_route(logits, M.bias, nullptr, {}, rs, ids, weights);  // drafts are text: no VL bias
  Tensor y = f32(Shape{n, text_.hidden_size});
  be_.moe_experts_rounded(x, ids, weights, M.experts, M.shared ? &*M.shared : nullptr,
                          static_cast<float>(text_.swiglu_limit), y);
  return y;
}

}  // namespace flashdesk
