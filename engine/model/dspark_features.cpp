// DSpark target features (docs/dspark.md): the mean over the hc streams of the input of each
// dspark_target_layer_ids layer (after its Engram update), gathered per sequence into
// [rows, targets, hidden] for the draft head's main_proj.
#include <algorithm>

#include "engine/model/step_runner.h"

namespace flashdesk {

void StepRunner::record_target_features(int64_t layer) {
  const auto& targets = text_.dspark_target_layer_ids;
  const auto it = std::find(targets.begin(), targets.end(), layer);
  if (it == targets.end()) return;
  const bool wanted = std::any_of(batch_.begin(), batch_.end(),
                                  [](const SequenceStep& s) { return s.want_features; });
  if (!wanted) return;
  const int64_t index = it - targets.begin(), T = static_cast<int64_t>(targets.size());
  const int64_t hc = text_.hc_mult, D = text_.hidden_size;
  // The mean as a collapse with weights 1/hc: exact for hc = 4 (a power of two scales exactly),
  // and the sum runs in stream order as the mean's does.
  std::vector<float> quarter(static_cast<size_t>(n_rows_ * hc), 1.0f / static_cast<float>(hc));
  Tensor w = f32(Shape{n_rows_, hc});
  be_.write(w, quarter.data(), quarter.size() * sizeof(float));
  Tensor mean = f32(Shape{n_rows_, D});
  be_.hc_collapse(X_, w, mean);
  for (const SeqRows& r : seqs_) {
    SequenceStep& s = batch_[static_cast<size_t>(r.seq)];
    if (!s.want_features) continue;
    if (index == 0) {
      s.out_features = f32(Shape{r.n_rows, T, D});
      s.features_first_position = r.first_position;
    }
    FD_CHECK(s.out_features.defined() && s.out_features.rows() == r.n_rows &&
                 s.features_first_position == r.first_position,
             "DSpark target layers see different rows (a bounded-replay cut between them)");
    std::vector<int64_t> src, dst;
    for (int64_t j = 0; j < r.n_rows; ++j) {
      src.push_back(r.first_row + j);
      dst.push_back(j * T + index);
    }
    Tensor flat = s.out_features.reshaped(Shape{r.n_rows * T, D});
    be_.scatter_rows(mean, src, flat, dst);
  }
}

}  // namespace flashdesk
