// The step driver: embedding, the blocks top to bottom (single-pass mHC around attention and
// MoE), the bounded-replay row cut at the first decoder layer, final collapse and logits.
#include "engine/model/step_runner.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine/util/numeric.h"

namespace flashdesk {

StepRunner::StepRunner(Model& model, std::span<SequenceStep> batch, ForwardObserver* observer)
    : model_(model),
      be_(model.backend_),
      text_(model.config().text),
      w_(*model.weights_),
      batch_(batch),
      obs_(observer),
      topk_(batch.size()),
      candidates_(batch.size()) {
  for (size_t i = 0; i < batch.size(); ++i) {
    SequenceStep& s = batch[i];
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    SeqRows r{static_cast<int64_t>(i), s.state, n_rows_, n, s.state->position() - s.replay};
    for (int64_t j = 0; j < n; ++j) {
      positions_.push_back(r.first_position + j);
      rows_.push_back(RowInfo{r.seq, r.first_position + j});
    }
    // The step's tokens join the history first: Engram hashing reads them.
    s.state->tokens.insert(s.state->tokens.end(), s.tokens.begin() + s.replay, s.tokens.end());
    s.state->dead.resize(s.state->tokens.size(), 0);
    mark_image_tokens(s, r);
    n_rows_ += n;
    seqs_.push_back(r);
  }
}

// Image-span tokens are dead: they cut Engram look-back, get Engram gate 0 and route with
// bias_vl. Replayed tokens keep the flags they were given when first run.
void StepRunner::mark_image_tokens(const SequenceStep& s, const SeqRows& r) {
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  for (const ImageEmbedding& img : s.images) {
    const int64_t from = std::max<int64_t>(img.first, s.replay);
    const int64_t to = std::min<int64_t>(img.first + img.rows.rows(), n);
    for (int64_t j = from; j < to; ++j)
      s.state->dead[static_cast<size_t>(r.first_position + j)] = 1;
  }
}

// Row j of an image's span rows replaces the embedding (every hc stream) of token first + j.
void StepRunner::overwrite_image_rows(Tensor& rows) {
  const int64_t hc = text_.hc_mult, D = text_.hidden_size;
  Tensor streams = X_.reshaped(Shape{n_rows_ * hc, D});
  for (const SeqRows& r : seqs_) {
    const SequenceStep& s = batch_[static_cast<size_t>(r.seq)];
    for (const ImageEmbedding& img : s.images) {
      check_shape(img.rows, Shape{img.rows.rows(), D}, "image span rows");
      std::vector<int64_t> src, dst, src4, dst4;
      for (int64_t j = 0; j < img.rows.rows(); ++j) {
        const int64_t t = img.first + j;
        if (t < 0 || t >= r.n_rows) continue;
        src.push_back(j);
        dst.push_back(r.first_row + t);
        for (int64_t k = 0; k < hc; ++k) {
          src4.push_back(j);
          dst4.push_back((r.first_row + t) * hc + k);
        }
      }
      if (src.empty()) continue;
      be_.scatter_rows(img.rows, src, rows, dst);
      be_.scatter_rows(as_stream_rows(img.rows), src4, streams, dst4);
    }
  }
}

std::vector<uint8_t> StepRunner::image_rows() const {
  std::vector<uint8_t> out(static_cast<size_t>(n_rows_), 0);
  bool any = false;
  for (int64_t i = 0; i < n_rows_; ++i) {
    const RowInfo& ri = rows_[static_cast<size_t>(i)];
    const SequenceState& st = *batch_[static_cast<size_t>(ri.seq)].state;
    out[static_cast<size_t>(i)] = st.dead[static_cast<size_t>(ri.position)];
    any = any || out[static_cast<size_t>(i)] != 0;
  }
  if (!any) out.clear();
  return out;
}

void StepRunner::observe(int64_t layer, std::string_view kind, const Tensor& t) {
  if (obs_) obs_->on_layer_tensor(layer, kind, rows_, to_host(t));
}

HostTensor StepRunner::to_host(const Tensor& t) {
  std::vector<int64_t> shape;
  for (int i = 0; i < t.shape().rank(); ++i) shape.push_back(t.dim(i));
  HostTensor h = HostTensor::zeros(t.dtype(), shape);
  be_.read(t, h.bytes.data(), h.bytes.size());
  return h;
}

HostTensor StepRunner::streams_to_host(const Tensor& X) {
  HostTensor h = to_host(X);
  if (h.dtype == DType::F32) return h;
  FD_CHECK(h.dtype == DType::BF16, "streams: F32 or BF16 storage");
  HostTensor f = HostTensor::zeros(DType::F32, h.shape);
  const auto* bits = reinterpret_cast<const uint16_t*>(h.bytes.data());
  auto* values = reinterpret_cast<float*>(f.bytes.data());
  for (int64_t i = 0; i < h.numel(); ++i) values[i] = bf16_to_f32(bits[i]);
  return f;
}

void StepRunner::write_streams(Tensor& X, const HostTensor& values) {
  FD_CHECK(values.dtype == DType::F32 && values.numel() == X.numel(), "streams: F32 values");
  if (X.dtype() == DType::F32) return be_.write(X, values.bytes.data(), values.bytes.size());
  std::vector<uint16_t> bits(static_cast<size_t>(values.numel()));
  const auto* v = reinterpret_cast<const float*>(values.bytes.data());
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(v[i]);
  be_.write(X, bits.data(), bits.size() * sizeof(uint16_t));
}

Tensor StepRunner::as_stream_rows(const Tensor& rows) {
  if (rows.dtype() == be_.stream_dtype()) return rows;
  HostTensor h = to_host(rows);
  Tensor out = be_.alloc(be_.stream_dtype(), rows.shape());
  write_streams(out, h);
  return out;
}

void StepRunner::all_reduce_and_round(Tensor& t) {
  model_.comm_->all_reduce_sum(t);
  be_.round_bf16(t);
}

namespace {
// Steps of up to this many rows (decode, speculative verification, short appends) are issued as
// one step graph (Backend::step_graph_begin): many small kernels whose launches cost about what
// they do. Longer ones are few large kernels, and each new row count would be a new graph.
constexpr int64_t kGraphRows = 64;

// FLASHDESK_ENGRAM_AHEAD=0 leaves each Engram layer to gather its own rows: read each step, so
// that `cuda_model_bench --ab FLASHDESK_ENGRAM_AHEAD` measures both in one process.
bool engram_ahead() {
  const char* v = std::getenv("FLASHDESK_ENGRAM_AHEAD");
  return !(v && std::string(v) == "0");
}
}  // namespace

void StepRunner::run() {
  // An observed step reads tensors after every block: it stays a sequence of launches.
  const bool graph = n_rows_ <= kGraphRows && !obs_;
  if (graph) be_.step_graph_begin(n_rows_);
  Tensor logits;
  next_attn_input_ = Tensor();
  try {
    embed();
    // Decode-sized steps gather their Engram rows up front, beside the first blocks (their rows
    // are a few KB; a prompt's would be hundreds of MB held through the step).
    if (n_rows_ <= kGraphRows && engram_ahead()) prefetch_engram();
    const int64_t n_layers = text_.num_hidden_layers;
    for (int64_t layer = 0; layer < n_layers && n_rows_ > 0; ++layer) {
      run_block(layer);
      if (graph) be_.step_graph_layer_done();
    }
    logits = compute_logits();
    settle_engram_ahead();
  } catch (...) {
    settle_engram_ahead();
    if (graph) be_.step_graph_abort();
    throw;
  }
  if (graph) be_.step_graph_end();
  take_logits(logits);
}

void StepRunner::embed() {
  const int64_t D = text_.hidden_size, hc = text_.hc_mult;
  std::vector<int32_t> ids;
  for (const auto& s : batch_) ids.insert(ids.end(), s.tokens.begin(), s.tokens.end());
  Tensor rows = f32(Shape{n_rows_, D});
  X_ = streams(Shape{n_rows_, hc, D});
  be_.embed(w_.embed, ids, rows, X_);
  overwrite_image_rows(rows);
  std::vector<float> pre(static_cast<size_t>(n_rows_ * hc), 0.0f);
  for (int64_t i = 0; i < n_rows_; ++i) pre[static_cast<size_t>(i * hc)] = 1.0f;  // [1, 0, ...]
  pre_ = f32(Shape{n_rows_, hc});
  be_.write(pre_, pre.data(), pre.size() * sizeof(float));
  if (obs_) obs_->on_embed(rows_, to_host(rows));
}

void StepRunner::override_input(int64_t layer) {
  if (!obs_ || !obs_->overrides_block_inputs()) return;
  HostTensor X = streams_to_host(X_), pre = to_host(pre_);
  obs_->override_block_input(layer, rows_, X, pre);
  write_streams(X_, X);
  be_.write(pre_, pre.bytes.data(), pre.bytes.size());
}

Tensor StepRunner::attn_input(const Tensor& X, const Tensor& pre, const Tensor& norm) {
  Tensor u = f32(Shape{X.rows(), text_.hidden_size});
  be_.hc_collapse_norm(X, pre, norm, static_cast<float>(text_.rms_norm_eps), u);
  return u;
}

void StepRunner::run_block(int64_t layer) {
  const LayerRole& role = model_.roles_[static_cast<size_t>(layer)];
  const LayerWeights& L = w_.layers[static_cast<size_t>(layer)];
  const int64_t hc = text_.hc_mult, D = text_.hidden_size;
  const HcSettings hs{hc, static_cast<float>(text_.rms_norm_eps), static_cast<float>(text_.hc_eps),
                      text_.hc_sinkhorn_iters};
  override_input(layer);
  if (role.engram) engram(layer);
  bool compressed_done = false;
  if (layer == model_.decoder_first_) {
    // Bounded replay: every row becomes global KV; the decoder blocks then run on the tail.
    const bool cut = std::any_of(seqs_.begin(), seqs_.end(), [&](const SeqRows& s) {
      return batch_[static_cast<size_t>(s.seq)].decoder_from > s.first_position;
    });
    if (cut && L.attn.compressor) {
      compress(layer, attn_input(X_, pre_, L.attn_norm));
      compressed_done = true;
    }
    if (cut) shrink_to_decoder_rows();
    if (n_rows_ == 0) return;
  }
  record_target_features(layer);
  const int64_t n = n_rows_;
  Tensor pre_a = f32(Shape{n, hc}), post_a = f32(Shape{n, hc}), comb_a = f32(Shape{n, hc, hc});
  // A sublayer's mixes are read only by its expansion (post, comb) and the next sublayer's input
  // (pre): a backend may compute them beside the sublayer's body. The attention's are issued
  // after the beside sections the attention waits for (its key/value row's; issued first, the
  // mixes held that row back on the CUDA backend's lane: docs/cuda-backend.md, thirty-seventh
  // session).
  Backend::Beside mixes;
  auto issue_mixes = [&] {
    mixes = mixes_beside(layer, X_, L.hc_attn, hs, "hc_attn", pre_a, post_a, comb_a);
  };
  const Tensor attn_in =
      next_attn_input_.defined() ? next_attn_input_ : attn_input(X_, pre_, L.attn_norm);
  next_attn_input_ = Tensor();
  Tensor a = attention(layer, attn_in, compressed_done, issue_mixes);
  if (obs_) obs_->on_attn_out(layer, rows_, to_host(a));
  be_.join(mixes);
  // The streams after attention and the FFN's input in one op (the single-pass mHC: the FFN's
  // input takes the attention's pre mix, not its own).
  Tensor X1 = streams(Shape{n, hc, D}), u = f32(Shape{n, D});
  be_.hc_expand_collapse_norm(X_, a, post_a, comb_a, pre_a, L.ffn_norm,
                              static_cast<float>(text_.rms_norm_eps), X1, u);

  Tensor pre_f = f32(Shape{n, hc}), post_f = f32(Shape{n, hc}), comb_f = f32(Shape{n, hc, hc});
  mixes = mixes_beside(layer, X1, L.hc_ffn, hs, "hc_ffn", pre_f, post_f, comb_f);
  Tensor y = moe(layer, u);
  if (obs_) obs_->on_ffn_out(layer, rows_, to_host(y));
  be_.join(mixes);
  Tensor X2 = streams(Shape{n, hc, D});
  if (next_input_follows(layer + 1)) {
    next_attn_input_ = f32(Shape{n, D});
    be_.hc_expand_collapse_norm(X1, y, post_f, comb_f, pre_f,
                                w_.layers[static_cast<size_t>(layer + 1)].attn_norm,
                                static_cast<float>(text_.rms_norm_eps), X2, next_attn_input_);
  } else {
    be_.hc_expand(X1, y, post_f, comb_f, X2);
  }
  X_ = X2;
  pre_ = pre_f;
  if (obs_) obs_->on_block_out(layer, rows_, streams_to_host(X_), to_host(pre_));
}

Backend::Beside StepRunner::mixes_beside(int64_t layer, const Tensor& X, const HcParams& p,
                                         const HcSettings& hs, std::string_view name, Tensor& pre,
                                         Tensor& post, Tensor& comb) {
  const Backend::Beside mixes = be_.hc_mixes_beside(X, p, hs, pre, post, comb);
  if (!obs_) return mixes;
  be_.join(mixes);
  observe(layer, std::string(name) + "_pre", pre);
  observe(layer, std::string(name) + "_post", post);
  observe(layer, std::string(name) + "_comb", comb);
  return mixes;
}

bool StepRunner::next_input_follows(int64_t layer) const {
  return layer < text_.num_hidden_layers && !obs_ &&
         !model_.roles_[static_cast<size_t>(layer)].engram && layer != model_.decoder_first_;
}

void StepRunner::shrink_to_decoder_rows() {
  std::vector<int64_t> keep;
  std::vector<int64_t> positions;
  std::vector<RowInfo> rows;
  int64_t next = 0;
  for (SeqRows& s : seqs_) {
    const int64_t from =
        std::max(batch_[static_cast<size_t>(s.seq)].decoder_from, s.first_position);
    const int64_t skip = from - s.first_position;
    for (int64_t j = skip; j < s.n_rows; ++j) {
      keep.push_back(s.first_row + j);
      positions.push_back(positions_[static_cast<size_t>(s.first_row + j)]);
      rows.push_back(rows_[static_cast<size_t>(s.first_row + j)]);
    }
    s.first_row = next;
    s.n_rows -= skip;
    s.first_position = from;
    next += s.n_rows;
  }
  const int64_t hc = text_.hc_mult, D = text_.hidden_size, n = static_cast<int64_t>(keep.size());
  Tensor X = streams(Shape{n, hc, D}), pre = f32(Shape{n, hc});
  if (n > 0) {
    be_.gather_rows(X_, keep, X);
    be_.gather_rows(pre_, keep, pre);
  }
  X_ = X;
  pre_ = pre;
  positions_ = std::move(positions);
  rows_ = std::move(rows);
  n_rows_ = n;
  // Top-k rows of earlier layers belong to the old row set; decoder layers compute their own.
  for (auto& m : topk_) m.clear();
  for (auto& m : candidates_) m.clear();
}

Tensor StepRunner::compute_logits() {
  std::vector<int64_t> sel;
  for (const SeqRows& s : seqs_) {
    SequenceStep& st = batch_[static_cast<size_t>(s.seq)];
    st.out_logits.clear();
    st.logit_positions.clear();
    if (st.logits == LogitsWanted::None || s.n_rows == 0) continue;
    const int64_t first = st.logits == LogitsWanted::All ? 0 : s.n_rows - 1;
    for (int64_t j = first; j < s.n_rows; ++j) {
      sel.push_back(s.first_row + j);
      st.logit_positions.push_back(s.first_position + j);
    }
  }
  if (sel.empty()) return Tensor();
  const int64_t n = static_cast<int64_t>(sel.size()), hc = text_.hc_mult, D = text_.hidden_size;
  const int64_t V = text_.vocab_size;
  Tensor X = streams(Shape{n, hc, D}), pre = f32(Shape{n, hc});
  be_.gather_rows(X_, sel, X);
  be_.gather_rows(pre_, sel, pre);
  Tensor h = attn_input(X, pre, w_.norm);
  Tensor logits = f32(Shape{n, V});
  be_.linear(h, w_.head, kF32Linear, logits);
  return logits;
}

void StepRunner::take_logits(const Tensor& logits) {
  if (!logits.defined()) return;
  const int64_t n = logits.rows(), V = text_.vocab_size;
  std::vector<float> host(static_cast<size_t>(n * V));
  be_.read(logits, host.data(), host.size() * sizeof(float));
  int64_t at = 0;
  for (const SeqRows& s : seqs_) {
    SequenceStep& st = batch_[static_cast<size_t>(s.seq)];
    const size_t count = st.logit_positions.size() * static_cast<size_t>(V);
    st.out_logits.assign(host.begin() + at, host.begin() + at + static_cast<int64_t>(count));
    at += static_cast<int64_t>(count);
  }
}

}  // namespace flashdesk
