// The indexer of a verify step, row by row: every row selects as a one-token decode at its
// position does (its own score-row width, so exactly tied scores fall the same way), and the
// rows' top-k and candidate blocks are joined into one tensor padded with -1 (none), which the
// attention and the restricted indexers read as absent entries.
#include <algorithm>

#include "engine/model/step_runner.h"

namespace flashdesk {
namespace {

// Rows of different widths [1, cols_j] (I32, host) into [n, cols] padded with -1.
Tensor join_padded(Backend& be, const std::vector<std::vector<int32_t>>& rows) {
  size_t cols = 0;
  for (const auto& r : rows) cols = std::max(cols, r.size());
  std::vector<int32_t> host(rows.size() * cols, -1);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy(rows[i].begin(), rows[i].end(), &host[i * cols]);
  Tensor t =
      be.alloc(DType::I32, Shape{static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)});
  if (!host.empty()) be.write(t, host.data(), host.size() * sizeof(int32_t));
  return t;
}

std::vector<int32_t> read_i32(Backend& be, const Tensor& t) {
  std::vector<int32_t> out(static_cast<size_t>(t.shape().numel()));
  if (!out.empty()) be.read(t, out.data(), out.size() * sizeof(int32_t));
  return out;
}

}  // namespace

void StepRunner::index_each_row(int64_t layer, const SeqRows& s, const Tensor& qi,
                                const Tensor& w) {
  const LayerRole& role = model_.roles_[static_cast<size_t>(layer)];
  const GlobalKv& g = s.state->global[static_cast<size_t>(role.kv_source)];
  const int64_t m = role.compress_ratio;
  const bool restricted = role.candidate_source >= 0 && !role.builds_candidates;
  auto& seq_cand = candidates_[static_cast<size_t>(s.seq)];
  std::vector<std::vector<int32_t>> topk_rows, cand_rows;
  for (int64_t j = 0; j < s.n_rows; ++j) {
    const int64_t row = s.first_row + j;
    const int64_t visible = (s.first_position + j + 1) / m;  // a decode's entries: its width too
    const Tensor q_r = qi.rows(row, 1), w_r = w.rows(row, 1);
    const std::vector<int64_t> n_visible{visible};
    IndexerArgs args;
    args.q = &q_r;
    args.weights = &w_r;
    args.n_visible = n_visible;
    args.keys = EntryCache{&g.index_keys, std::min(visible, g.n_entries)};
    args.select_width = visible;
    args.block_size = text_.candidate_block_size;
    Tensor restrict_row;
    if (restricted) {
      restrict_row = seq_cand.at(role.candidate_source).rows(j, 1);
      args.restrict_blocks = &restrict_row;
    }
    Tensor topk = be_.alloc(DType::I32, Shape{1, std::min(text_.index_topk, visible)});
    Tensor cand;
    if (role.builds_candidates) {
      const int64_t n_blocks = (visible + args.block_size - 1) / args.block_size;
      cand = be_.alloc(DType::I32, Shape{1, std::min(text_.candidate_topk_blocks, n_blocks)});
    }
    be_.indexer_select(args, topk, role.builds_candidates ? &cand : nullptr);
    topk_rows.push_back(read_i32(be_, topk));
    if (role.builds_candidates) cand_rows.push_back(read_i32(be_, cand));
  }
  Tensor topk = join_padded(be_, topk_rows);
  if (obs_) obs_->on_topk(layer, row_info(s), to_host(topk));
  topk_[static_cast<size_t>(s.seq)][layer] = topk;
  if (role.builds_candidates) seq_cand[layer] = join_padded(be_, cand_rows);
}

}  // namespace flashdesk
