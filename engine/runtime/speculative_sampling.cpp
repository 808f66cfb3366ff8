// The speculative-sampling rule (see speculative_sampling.h).
#include "engine/runtime/speculative_sampling.h"

#include <algorithm>

#include "engine/util/error.h"

namespace flashdesk {

SpeculativeStep speculative_step(std::span<const double> p, std::span<const double> q,
                                 int64_t draft, Sampler& rng) {
  FD_CHECK(p.size() == q.size() && draft >= 0 && draft < static_cast<int64_t>(p.size()),
           "speculative_step: p, q and the draft disagree in size");
  const auto x = static_cast<size_t>(draft);
  // u < p(x) / q(x), without dividing (q(x) > 0: x was drawn from q).
  if (rng.uniform() * q[x] < p[x]) return {true, draft};
  std::vector<double> residual(p.size());
  double mass = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    residual[i] = std::max(0.0, p[i] - q[i]);
    mass += residual[i];
  }
  // A rejection means p(x) < q(x), so the residual has mass unless p and q differ by rounding
  // only; then p itself is the residual's limit.
  return {false, rng.draw(mass > 0.0 ? std::span<const double>(residual) : p)};
}

int32_t SpeculativeSampler::draw_draft(int64_t row, std::span<const float> logits) {
  if (row == 0) q_.clear();
  FD_CHECK(row == static_cast<int64_t>(q_.size()), "draft rows must come in order");
  q_.push_back(sampler_.distribution(logits));
  return static_cast<int32_t>(sampler_.draw(q_.back()));
}

std::vector<int32_t> SpeculativeSampler::accept(std::span<const int32_t> drafts,
                                                std::span<const float> target_logits, int64_t vocab,
                                                bool forced) {
  const size_t k = drafts.size(), V = static_cast<size_t>(vocab);
  FD_CHECK(target_logits.size() == (k + 1) * V, "accept: the target must give k + 1 rows");
  FD_CHECK(forced || q_.size() >= k, "accept: fewer draft distributions than drafts");
  std::vector<int32_t> tokens;
  std::vector<double> point;
  for (size_t i = 0; i < k; ++i) {
    const std::vector<double> p = sampler_.distribution(target_logits.subspan(i * V, V));
    std::span<const double> q;
    if (forced) {  // a draft chosen by other means: a point-mass proposal is still exact
      point.assign(V, 0.0);
      point[static_cast<size_t>(drafts[i])] = 1.0;
      q = point;
    } else {
      q = q_[i];
    }
    const SpeculativeStep s = speculative_step(p, q, drafts[i], sampler_);
    tokens.push_back(static_cast<int32_t>(s.token));
    if (!s.accepted) return tokens;
  }
  const std::vector<double> p = sampler_.distribution(target_logits.subspan(k * V, V));
  tokens.push_back(static_cast<int32_t>(sampler_.draw(p)));
  return tokens;
}

}  // namespace flashdesk
