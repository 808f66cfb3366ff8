// The indexer of a verify step, row by row: every row selects as a one-token decode at its
// position does (its own score-row width, so exactly tied scores fall the same way), and the
// rows' top-k and candidate blocks form one tensor, -1 (none) past each row's choices, which the
// attention and the restricted indexers read as absent entries.
#include <algorithm>

#include "engine/model/step_runner.h"

namespace flashdesk {
void StepRunner::index_each_row(int64_t layer, const SeqRows& s, const Tensor& qi,
                                const Tensor& w) {
  const LayerRole& role = model_.roles_[static_cast<size_t>(layer)];
  const GlobalKv& g = s.state->global[static_cast<size_t>(role.kv_source)];
  const int64_t m = role.compress_ratio, bs = text_.candidate_block_size;
  const bool restricted = role.candidate_source >= 0 && !role.builds_candidates;
  auto& seq_cand = candidates_[static_cast<size_t>(s.seq)];
  const auto visible_of = [&](int64_t j) { return (s.first_position + j + 1) / m; };
  // Each row selects straight into its row of the step's tensors (index_topk and
  // candidate_topk_blocks columns, as in StepRunner::index; every backend writes all of a row,
  // -1 past its choices), so nothing is read back: on a GPU backend a read-back is a
  // synchronisation per row and index layer.
  Tensor topk_all = be_.alloc(DType::I32, Shape{s.n_rows, text_.index_topk});
  Tensor cand_all;
  if (role.builds_candidates)
    cand_all = be_.alloc(DType::I32, Shape{s.n_rows, text_.candidate_topk_blocks});
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
    Tensor topk = topk_all.rows(j, 1);
    Tensor cand;
    if (role.builds_candidates) cand = cand_all.rows(j, 1);
    be_.indexer_select(args, topk, role.builds_candidates ? &cand : nullptr);
  }
  if (obs_) obs_->on_topk(layer, row_info(s), to_host(topk_all));
  topk_[static_cast<size_t>(s.seq)][layer] = topk_all;
  if (role.builds_candidates) seq_cand[layer] = cand_all;
}

}  // namespace flashdesk
