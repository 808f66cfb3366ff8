// StepGraphChoice: the trial of launches against step graphs (step_graph_choice.h).
#include "engine/ops/step_graph_choice.h"

#include <algorithm>

namespace flashdesk {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

StepGraphChoice::Way StepGraphChoice::trial_way() const {
  if (decided_) return chosen_;
  return block_ % 2 == 0 ? Way::Launches : Way::Graphs;
}

StepGraphChoice::Way StepGraphChoice::way(int64_t rows) const {
  return tried(rows) ? trial_way() : Way::Launches;
}

StepGraphChoice::Way StepGraphChoice::begin_step(int64_t rows) {
  pending_ = tried(rows) && !decided_;
  return way(rows);
}

void StepGraphChoice::step_took(double seconds) {
  if (!pending_) return;
  pending_ = false;
  if (block_ >= 2) samples_[block_ % 2].push_back(seconds);  // blocks 0 and 1: warm-ups
  if (++timed_in_block_ < kBlockSteps) return;
  timed_in_block_ = 0;
  if (++block_ < kBlocks) return;
  medians_[0] = median(samples_[0]);
  medians_[1] = median(samples_[1]);
  chosen_ = medians_[1] < medians_[0] * (1.0 - kMargin) ? Way::Graphs : Way::Launches;
  decided_ = true;
}

}  // namespace flashdesk
