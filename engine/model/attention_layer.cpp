// CSA2 attention of one layer (docs/model-spec.md §3.5-3.7, docs/numerics.md "Attention"): query
// and window KV, the KV source's compressor (global KV and index keys), the indexer (top-k,
// candidate blocks, Reindex restriction), sparse attention over window + top-k entries with the
// sink, inverse RoPE and the grouped output projection.
#include <algorithm>
#include <cmath>

#include "engine/model/attention_inputs.h"
#include "engine/model/step_runner.h"

namespace flashdesk {

Tensor StepRunner::attention(int64_t layer, const Tensor& x, bool compressed_done,
                             const std::function<void()>& after_sections) {
  const LayerRole& role = model_.roles_[static_cast<size_t>(layer)];
  const AttentionWeights& A = w_.layers[static_cast<size_t>(layer)].attn;
  const std::vector<float>& freq = model_.rope_[static_cast<size_t>(layer)];
  const int64_t n = n_rows_, D = text_.head_dim, H = A.sink.dim(0);

  // The compressor and the indexer read neither the query nor its RoPE: where the backend gains
  // from it, they run beside the query's projections (not observed: an observer reads the top-k
  // on the host, which a beside section may not).
  const bool compress_here = A.compressor && !compressed_done;
  const bool beside = A.indexer && !obs_ && be_.indexer_beside_query(n);
  BesideWork work;
  work.after_sections = after_sections;
  if (beside) {
    if (compress_here) {
      reserve_compressed_entries(layer);
      work.with_kv = [&] { compress(layer, x); };
    }
    work.with_qr = [&](const Tensor& qr) { index(layer, qr, x); };
  }
  const AttentionInputs in = project_attention_inputs(be_, A, text_, x, positions_, freq, &work);
  const Tensor &qr = in.qr, &q = in.q, &step_kv = in.step_kv;
  observe(layer, "attn_q", q);

  if (!beside) {
    if (compress_here) compress(layer, x);
    if (A.indexer) index(layer, qr, x);
  }

  Tensor o = f32(Shape{n, H, D});
  const int64_t W = text_.sliding_window;
  for (const SeqRows& s : seqs_) {
    SequenceState& st = *s.state;
    WindowRing& ring = st.rings[static_cast<size_t>(layer)];
    const Tensor q_s = q.rows(s.first_row, s.n_rows);
    const Tensor kv_s = step_kv.rows(s.first_row, s.n_rows);
    Tensor o_s = o.rows(s.first_row, s.n_rows);
    AttentionArgs args;
    args.q = &q_s;
    args.positions = positions(s);
    args.window = WindowKv{&ring.rows, ring.positions, &kv_s, s.first_position, W};
    args.sink = &A.sink;
    args.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    if (role.compress_ratio > 0) {
      const GlobalKv& g = st.global[static_cast<size_t>(role.kv_source)];
      args.compressed = EntryCache{&g.entries, g.n_entries};
      args.topk = &topk_[static_cast<size_t>(s.seq)].at(role.index_source);
    }
    // Observed, the output is handed over before and after its RoPE is undone.
    if (obs_)
      be_.sparse_attention(args, o_s);
    else
      be_.sparse_attention_unrotated(args, freq, o_s);
    // The last min(n, W) rows of this step enter the ring.
    std::vector<int64_t> src, slots;
    for (int64_t j = std::max<int64_t>(0, s.n_rows - W); j < s.n_rows; ++j) {
      src.push_back(j);
      slots.push_back((s.first_position + j) % W);
      ring.positions[static_cast<size_t>(slots.back())] = s.first_position + j;
    }
    be_.scatter_rows(kv_s, src, ring.rows, slots);
  }

  if (obs_) {
    observe(layer, "attn_raw", o);
    be_.rope(o, D, positions_, freq, true);
    observe(layer, "attn_unrot", o);
  }
  const int64_t groups = A.wo_a.out / text_.o_lora_rank;
  Tensor z = f32(Shape{n, A.wo_a.out});
  be_.grouped_linear(o, A.wo_a, groups, z);
  observe(layer, "attn_wo_a", z);
  Tensor a = f32(Shape{n, text_.hidden_size});
  // With one device there is nothing to reduce: the linear rounds its FP32 sums itself, the same
  // values as rounding them afterwards, one launch fewer a layer on a GPU.
  const bool reduce = model_.comm_->world() > 1;
  be_.linear(z, A.wo_b,
             reduce ? LinearMode{LinearInput::ActQuantFp8, LinearOutput::F32} : kQuantLinear, a);
  if (reduce) all_reduce_and_round(a);
  return a;
}

void StepRunner::compress(int64_t layer, const Tensor& x) {
  const CompressorWeights& C = *w_.layers[static_cast<size_t>(layer)].attn.compressor;
  const int64_t m = model_.roles_[static_cast<size_t>(layer)].compress_ratio;
  const int64_t D = text_.head_dim, d_ih = text_.index_head_dim, n = n_rows_;
  const float eps = static_cast<float>(text_.rms_norm_eps);
  const std::vector<float>& freq = model_.rope_[static_cast<size_t>(layer)];
  Tensor kv = f32(Shape{n, D}), score;
  if (m == 1) {
    be_.linear(x, C.wkv, kBf16Linear, kv);
  } else {
    score = f32(Shape{n, D});
    be_.linear(x, C.wkv, kF32Linear, kv);
    be_.linear(x, C.wgate, kF32Linear, score);
  }
  for (const SeqRows& s : seqs_) {
    GlobalKv& g = s.state->global[static_cast<size_t>(layer)];
    // Rows whose global KV exists already (a replay after a restore) are not compressed again.
    const int64_t covered = g.n_entries * m + g.n_pending;
    const int64_t skip = std::clamp<int64_t>(covered - s.first_position, 0, s.n_rows);
    FD_CHECK(s.first_position + skip == covered,
             "compressor of layer " + std::to_string(layer) + " would skip positions");
    const int64_t first = s.first_row + skip, rows = s.n_rows - skip;
    if (s.state->rollback && m > 1)
      keep_for_rollback(*s.state, layer, kv.rows(first, rows), score.rows(first, rows), skip);
    Tensor latent;
    if (m == 1) {
      latent = kv.rows(first, rows);
    } else {
      latent = f32(Shape{(g.n_pending + rows) / m, D});
      be_.compressor_pool(kv.rows(first, rows), score.rows(first, rows), m, g.pending_kv,
                          g.pending_score, g.n_pending, latent);
    }
    const int64_t e = latent.rows();
    if (e == 0) continue;
    Tensor lat = f32(Shape{e, D});
    be_.rms_norm(latent, &C.norm, eps, lat);
    std::vector<int64_t> entry_pos(static_cast<size_t>(e));
    for (int64_t j = 0; j < e; ++j) entry_pos[static_cast<size_t>(j)] = (g.n_entries + j) * m;
    reserve_entries(be_, g, g.n_entries + e);
    Tensor k = f32(Shape{e, d_ih});
    be_.linear(lat, C.index_wk, kBf16Linear, k);
    be_.rope_quantize_rows(k, &C.index_k_norm, eps, entry_pos, freq, KvFormat::Fp4Key, g.index_keys,
                           g.n_entries);
    be_.rope_quantize_rows(lat, nullptr, eps, entry_pos, freq, KvFormat::Fp4Entry, g.entries,
                           g.n_entries);
    g.n_entries += e;
  }
}

void StepRunner::reserve_compressed_entries(int64_t layer) {
  const int64_t m = model_.roles_[static_cast<size_t>(layer)].compress_ratio;
  for (const SeqRows& s : seqs_) {
    GlobalKv& g = s.state->global[static_cast<size_t>(layer)];
    // At most (pending + rows) / m entries, pending < m.
    reserve_entries(be_, g, g.n_entries + s.n_rows / m + 1);
  }
}

// A rollback of the step's last rows rebuilds a pending group from these projections.
void StepRunner::keep_for_rollback(SequenceState& st, int64_t layer, const Tensor& kv,
                                   const Tensor& score, int64_t skip) {
  RollbackLog& log = *st.rollback;
  FD_CHECK(skip == 0 && log.before.position == st.position() - kv.rows(),
           "a rollback log covers exactly one step without replay");
  log.kv.resize(st.global.size());
  log.score.resize(st.global.size());
  const auto l = static_cast<size_t>(layer);
  log.kv[l] = be_.alloc(DType::F32, kv.shape());
  log.score[l] = be_.alloc(DType::F32, score.shape());
  be_.copy(kv, log.kv[l]);
  be_.copy(score, log.score[l]);
}

void StepRunner::index(int64_t layer, const Tensor& qr, const Tensor& x) {
  const LayerRole& role = model_.roles_[static_cast<size_t>(layer)];
  const IndexerWeights& I = *w_.layers[static_cast<size_t>(layer)].attn.indexer;
  const std::vector<float>& freq = model_.rope_[static_cast<size_t>(layer)];
  const int64_t n = n_rows_, n_ih = text_.index_n_heads, d_ih = text_.index_head_dim;
  const int64_t m = role.compress_ratio;
  Tensor qi = f32(Shape{n, n_ih, d_ih});
  be_.linear(qr, I.wq_b, kQuantLinear, qi);
  be_.rope(qi, d_ih, positions_, freq, false);
  be_.fake_quant_fp4_e8m0(qi, 32);
  Tensor w = f32(Shape{n, n_ih});
  be_.linear(x, I.weights_proj, kBf16Linear, w);
  // The official weights stay BF16: bf16(w * float(d_ih^-1/2 * n_ih^-1/2)), the constant formed in
  // double as Python forms it.
  be_.scale(w, static_cast<float>(std::pow(static_cast<double>(d_ih), -0.5) *
                                  std::pow(static_cast<double>(n_ih), -0.5)));
  be_.round_bf16(w);

  const bool restricted = role.candidate_source >= 0 && !role.builds_candidates;
  for (const SeqRows& s : seqs_) {
    if (batch_[static_cast<size_t>(s.seq)].rows_as_decode && s.n_rows > 1) {
      index_each_row(layer, s, qi, w);
      continue;
    }
    const GlobalKv& g = s.state->global[static_cast<size_t>(role.kv_source)];
    std::vector<int64_t> visible(static_cast<size_t>(s.n_rows));
    for (int64_t j = 0; j < s.n_rows; ++j)
      visible[static_cast<size_t>(j)] = (s.first_position + j + 1) / m;
    const Tensor q_s = qi.rows(s.first_row, s.n_rows), w_s = w.rows(s.first_row, s.n_rows);
    IndexerArgs args;
    args.q = &q_s;
    args.weights = &w_s;
    args.n_visible = visible;
    args.keys = EntryCache{&g.index_keys, g.n_entries};
    // The score row spans the entries at the end of the prompt this step belongs to (or of this
    // step), as the official one-shot prefill's does: ties then fall the same way in any chunking.
    const int64_t prompt_end = batch_[static_cast<size_t>(s.seq)].prompt_end;
    args.select_width = std::max(g.n_entries, prompt_end / m);
    args.block_size = text_.candidate_block_size;
    auto& seq_cand = candidates_[static_cast<size_t>(s.seq)];
    if (restricted) args.restrict_blocks = &seq_cand.at(role.candidate_source);
    // index_topk columns (and candidate_topk_blocks) at any length, those past the entries -1
    // (none): the width stays a constant of the model, so a short context's decode steps issue
    // the kernels, parameters and shapes of the step before and replay as a step graph
    // (step_graph.h). The selection is the same: every backend writes -1 past the k best.
    Tensor topk = be_.alloc(DType::I32, Shape{s.n_rows, text_.index_topk});
    Tensor cand;
    if (role.builds_candidates)
      cand = be_.alloc(DType::I32, Shape{s.n_rows, text_.candidate_topk_blocks});
    be_.indexer_select(args, topk, role.builds_candidates ? &cand : nullptr);
    if (obs_) obs_->on_topk(layer, row_info(s), to_host(topk));
    if (obs_ && role.builds_candidates)
      obs_->on_candidates(layer, row_info(s), to_host(cand), args.block_size, g.n_entries);
    topk_[static_cast<size_t>(s.seq)][layer] = topk;
    if (role.builds_candidates) seq_cand[layer] = cand;
  }
}

}  // namespace flashdesk
