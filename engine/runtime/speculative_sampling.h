// Speculative sampling (Leviathan et al. 2023, Chen et al. 2023): the rule that accepts or
// replaces drafted tokens so that the output keeps the target's sampling distribution exactly.
// A draft x drawn from the draft's distribution q is accepted with probability
// min(1, p(x) / q(x)), p being the target's; on rejection the token is drawn from the residual
// max(0, p - q) renormalised, and after k accepted drafts one more token is drawn from the next p.
// p and q are both after the request's temperature and top-p (Sampler::distribution), and every
// random number comes from the request's seeded Sampler, so a seed reproduces a run.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/dspark_decode.h"
#include "engine/runtime/sampler.h"

namespace flashdesk {

struct SpeculativeStep {
  bool accepted = false;
  int64_t token = 0;  // the draft when accepted, else a draw from the residual
};

// One position of the rule: `draft` was drawn from `q`; the result is distributed as `p`.
SpeculativeStep speculative_step(std::span<const double> p, std::span<const double> q,
                                 int64_t draft, Sampler& rng);

// DraftSampling for a verify round (dspark_decode.h), with the request's Sampler.
class SpeculativeSampler : public DraftSampling {
 public:
  explicit SpeculativeSampler(Sampler& sampler) : sampler_(sampler) {}

  int32_t draw_draft(int64_t row, std::span<const float> logits) override;
  std::vector<int32_t> accept(std::span<const int32_t> drafts, std::span<const float> target_logits,
                              int64_t vocab, bool forced) override;

 private:
  Sampler& sampler_;
  std::vector<std::vector<double>> q_;  // per block row of the last draft
};

}  // namespace flashdesk
