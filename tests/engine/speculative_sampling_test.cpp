// The speculative-sampling rule (engine/runtime/speculative_sampling.h) on hand-made p and q:
// the output token is distributed as p, the acceptance rate is sum min(p, q), and the accepted
// and resampled parts have their exact probabilities min(p, q) and max(0, p - q). Counts are
// checked per category within 5 standard deviations of n * probability: with the normal
// approximation a correct rule fails one category with probability 5.7e-7, so a whole test
// (at most 20 categories) fails falsely with probability below 1.2e-5 for a random seed; the
// seeds are fixed, so the runs are reproducible.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/runtime/speculative_sampling.h"

namespace flashdesk {
namespace {

void expect_count(int64_t count, double probability, int64_t n, const std::string& what) {
  const double mean = probability * static_cast<double>(n);
  const double sd = std::sqrt(static_cast<double>(n) * probability * (1.0 - probability));
  EXPECT_LE(std::abs(static_cast<double>(count) - mean), 5.0 * sd + 1e-9)
      << what << ": " << count << " of " << n << ", expected " << mean;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp(logits[i] / temperature);
  for (double& v : p) v /= total;
  return p;
}

TEST(SpeculativeStep, OutputIsDistributedAsTheTarget) {
  // p puts mass where q has none (id 4 -> 0) and q where p has none (id 5): both directions.
  const std::vector<double> p = {0.45, 0.2, 0.2, 0.05, 0.1, 0.0};
  const std::vector<double> q = {0.1, 0.5, 0.1, 0.05, 0.0, 0.25};
  Sampler rng({.temperature = 1.0f, .seed = 11});
  const int64_t n = 20000;
  std::map<int64_t, int64_t> accepted, resampled;
  int64_t accepts = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t draft = rng.draw(q);
    const SpeculativeStep s = speculative_step(p, q, draft, rng);
    if (s.accepted) {
      EXPECT_EQ(s.token, draft);
      ++accepted[s.token];
      ++accepts;
    } else {
      ++resampled[s.token];
    }
  }
  double overlap = 0.0;
  for (size_t y = 0; y < p.size(); ++y) {
    const auto id = static_cast<int64_t>(y);
    overlap += std::min(p[y], q[y]);
    expect_count(accepted[id] + resampled[id], p[y], n, "token " + std::to_string(y));
    expect_count(accepted[id], std::min(p[y], q[y]), n, "accepted " + std::to_string(y));
    expect_count(resampled[id], std::max(0.0, p[y] - q[y]), n, "resampled " + std::to_string(y));
  }
  expect_count(accepts, overlap, n, "acceptances");  // 0.45 here
}

TEST(SpeculativeStep, EqualDistributionsAlwaysAccept) {
  const std::vector<double> p = {0.3, 0.3, 0.4};
  Sampler rng({.temperature = 1.0f, .seed = 5});
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(speculative_step(p, p, rng.draw(p), rng).accepted);
}

// A whole round through SpeculativeSampler with temperature and top-p applied to hand-made
// logits: the drafts come from the draft rows (q), the first token is distributed as the first
// target row (p0) and, when the first draft was accepted, the second as p1. With both drafts
// accepted the third is the bonus draw from p2.
TEST(SpeculativeSampler, RoundKeepsTheTargetRows) {
  const float temperature = 0.8f, top_p = 0.9f;
  const std::vector<float> target = {2.0f, 1.0f, 0.5f,  -1.0f,  // p0
                                     0.0f, 1.5f, 1.4f,  0.3f,   // p1
                                     1.0f, 1.0f, -3.0f, 0.7f};  // p2
  const std::vector<float> draft = {0.5f, 2.0f, 0.1f, 0.0f,     // q0
                                    0.2f, 1.5f, 0.9f, 1.2f};    // q1
  Sampler sampler({.temperature = temperature, .top_p = top_p, .seed = 3});
  // The expected rows, from the definition: softmax at the temperature, the smallest most likely
  // set with mass >= top_p, renormalised.
  auto nucleus = [&](const float* row) {
    std::vector<double> p = softmax(std::vector<float>(row, row + 4), temperature);
    std::vector<size_t> order = {0, 1, 2, 3};
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    double mass = 0.0, kept = 0.0;
    std::vector<double> out(4, 0.0);
    for (size_t i : order) {
      if (mass >= top_p) break;
      mass += p[i];
      out[i] = p[i];
      kept += p[i];
    }
    for (double& v : out) v /= kept;
    return out;
  };
  const std::vector<double> p0 = nucleus(&target[0]), p1 = nucleus(&target[4]),
                            p2 = nucleus(&target[8]), q0 = nucleus(&draft[0]);
  EXPECT_EQ(p0[3], 0.0);  // the nucleus cut something: top-p is part of the check
  SpeculativeSampler rule(sampler);
  const int64_t n = 20000;
  std::map<int64_t, int64_t> first, second, third;
  int64_t two = 0, three = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t> drafts = {rule.draw_draft(0, std::span<const float>(&draft[0], 4)),
                                         rule.draw_draft(1, std::span<const float>(&draft[4], 4))};
    const std::vector<int32_t> tokens = rule.accept(drafts, target, 4, false);
    ASSERT_GE(tokens.size(), 1u);
    ASSERT_LE(tokens.size(), 3u);
    ++first[tokens[0]];
    if (tokens.size() >= 2) {
      EXPECT_EQ(tokens[0], drafts[0]);
      ++second[tokens[1]];
      ++two;
    }
    if (tokens.size() == 3) {
      EXPECT_EQ(tokens[1], drafts[1]);
      ++third[tokens[2]];
      ++three;
    }
  }
  double overlap = 0.0;
  for (size_t y = 0; y < 4; ++y) overlap += std::min(p0[y], q0[y]);
  expect_count(two, overlap, n, "first draft accepted");
  for (int64_t y = 0; y < 4; ++y) {
    const auto u = static_cast<size_t>(y);
    expect_count(first[y], p0[u], n, "first " + std::to_string(y));
    expect_count(second[y], p1[u], two, "second " + std::to_string(y));
    expect_count(third[y], p2[u], three, "third " + std::to_string(y));
  }
  EXPECT_GT(three, 1000);  // enough rounds reached the bonus draw to test it
}

// Drafts replaced by other means (forced) are point-mass proposals: the output is still p.
TEST(SpeculativeSampler, ForcedDraftsKeepTheTargetRow) {
  const std::vector<float> target = {1.0f, 0.0f, 0.5f, -0.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  Sampler sampler({.temperature = 1.0f, .seed = 9});
  SpeculativeSampler rule(sampler);
  const std::vector<double> p0 = softmax({1.0f, 0.0f, 0.5f, -0.5f}, 1.0);
  const int64_t n = 20000;
  std::map<int64_t, int64_t> first;
  int64_t accepted = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t> drafts = {2};
    const std::vector<int32_t> tokens = rule.accept(drafts, target, 4, true);
    ++first[tokens[0]];
    accepted += tokens.size() == 2;
  }
  for (int64_t y = 0; y < 4; ++y)
    expect_count(first[y], p0[static_cast<size_t>(y)], n, "first " + std::to_string(y));
  expect_count(accepted, p0[2], n, "forced draft accepted");
}

TEST(SamplerDistribution, GreedyIsAPointMassAndDrawNeverPicksZeroMass) {
  Sampler greedy({.temperature = 0.0f});
  const std::vector<float> logits = {0.0f, 3.0f, 3.0f, 1.0f};
  EXPECT_EQ(greedy.distribution(logits), (std::vector<double>{0.0, 1.0, 0.0, 0.0}));
  Sampler s({.temperature = 1.0f, .seed = 2});
  const std::vector<double> p = {0.0, 0.5, 0.0, 0.5, 0.0};
  for (int i = 0; i < 2000; ++i) {
    const int64_t id = s.draw(p);
    EXPECT_TRUE(id == 1 || id == 3) << id;
  }
}

}  // namespace
}  // namespace flashdesk
