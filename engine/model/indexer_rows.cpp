// The indexer of a verify step, row by row: every row selects as a one-token decode at its
// position does (its own score-row width, so exactly tied scores fall the same way), and the
// rows' top-k and candidate blocks form one tensor padded with -1 (none), which the attention and
// the restricted indexers read as absent entries.
#include <algorithm>

#include "engine/model/step_runner.h"

namespace flashdesk {
namespace {

// A tensor [n, cols] of -1 (none).
Tensor padded(Backend& be, int64_t n, int64_t cols) {
  Tensor t = be.alloc(DType::I32, Shape{n, cols});
  const std::vector<int32_t> none(static_cast<size_t>(n * cols), -1);
  if (!none.empty()) be.write(t, none.data(), none.size() * sizeof(int32_t));
  return t;
}

// Row j's first `cols` columns of `t` [n, wider], as a tensor [1, cols] sharing its memory.
Tensor row_prefix(const Tensor& t, int64_t j, int64_t cols) {
  const size_t row_bytes = static_cast<size_t>(t.dim(1)) * sizeof(int32_t);
  return Tensor(t.memory(), t.byte_offset() + static_cast<size_t>(j) * row_bytes, DType::I32,
                Shape{1, cols});
}

}  // namespace

void StepRunner::index_each_row(int64_t layer, const SeqRows& s, const Tensor& qi,
                                const Tensor& w) {
  const LayerRole& role = model_.roles_[static_cast<size_t>(layer)];
  const GlobalKv& g = s.state->global[static_cast<size_t>(role.kv_source)];
  const int64_t m = role.compress_ratio, bs = text_.candidate_block_size;
  const bool restricted = role.candidate_source >= 0 && !role.builds_candidates;
  auto& seq_cand = candidates_[static_cast<size_t>(s.seq)];
  const auto visible_of = [&](int64_t j) { return (s.first_position + j + 1) / m; };
  const auto topk_width = [&](int64_t j) { return std::min(text_.index_topk, visible_of(j)); };
  const auto cand_width = [&](int64_t j) {
    return std::min(text_.candidate_topk_blocks, (visible_of(j) + bs - 1) / bs);
  };
  // The last row sees the most entries: the widest. Each row selects straight into its row of
  // the step's tensors (the rest stays -1), so nothing is read back: on a GPU backend a
  // read-back is a synchronisation per row and index layer.
  const int64_t last = s.n_rows - 1;
  Tensor topk_all = padded(be_, s.n_rows, topk_width(last));
  Tensor cand_all;
  if (role.builds_candidates) cand_all = padded(be_, s.n_rows, cand_width(last));
  for (int64_t j = 0; j < s.n_rows; ++j) {
    const int64_t row = s.first_row + j;
    const int64_t visible = visible_of(j);  // a decode's entries: its width too
    const Tensor q_r = qi.rows(row, 1), w_r = w.rows(row, 1);
    const std::vector<int64_t> n_visible{visible};
    IndexerArgs args;
    args.q = &q_r;
    args.weights = &w_r;
    args.n_visible = n_visible;
    args.keys = EntryCache{&g.index_keys, std::min(visible, g.n_entries)};
    args.select_width = visible;
    args.block_size = bs;
    Tensor restrict_row;
    if (restricted) {
      restrict_row = seq_cand.at(role.candidate_source).rows(j, 1);
      args.restrict_blocks = &restrict_row;
    }
    Tensor topk = row_prefix(topk_all, j, topk_width(j));
    Tensor cand;
    if (role.builds_candidates) cand = row_prefix(cand_all, j, cand_width(j));
    be_.indexer_select(args, topk, role.builds_candidates ? &cand : nullptr);
  }
  if (obs_) obs_->on_topk(layer, row_info(s), to_host(topk_all));
  topk_[static_cast<size_t>(s.seq)][layer] = topk_all;
  if (role.builds_candidates) seq_cand[layer] = cand_all;
}

}  // namespace flashdesk
