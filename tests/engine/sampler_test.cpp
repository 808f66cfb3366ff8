// Sampler: greedy ties, determinism by seed, nucleus truncation and the empirical distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "engine/runtime/sampler.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

TEST(Sampler, GreedyTakesLowestIdOnTies) {
  Sampler s({.temperature = 0.0f});
  std::vector<float> logits = {1.0f, 3.0f, NAN, 3.0f, -2.0f};
  EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, SameSeedSameSequence) {
  std::vector<float> logits = {0.1f, 0.5f, 0.2f, 1.0f, 0.0f, -1.0f};
  Sampler a({.temperature = 1.0f, .top_p = 1.0f, .seed = 42});
  Sampler b({.temperature = 1.0f, .top_p = 1.0f, .seed = 42});
  Sampler c({.temperature = 1.0f, .top_p = 1.0f, .seed = 43});
  std::vector<int64_t> ra, rb, rc;
  for (int i = 0; i < 50; ++i) {
    ra.push_back(a.sample(logits));
    rb.push_back(b.sample(logits));
    rc.push_back(c.sample(logits));
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(Sampler, TopPKeepsOnlyTheNucleus) {
  // Probabilities ~ 0.64, 0.24, 0.09, 0.03: top_p 0.8 keeps the first two only.
  std::vector<float> logits = {std::log(0.64f), std::log(0.24f), std::log(0.09f), std::log(0.03f)};
  Sampler s({.temperature = 1.0f, .top_p = 0.8f, .seed = 7});
  std::map<int64_t, int> counts;
  for (int i = 0; i < 4000; ++i) counts[s.sample(logits)]++;
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_EQ(counts.count(3), 0u);
  // Renormalised: 0.64 / 0.88 = 0.727.
  EXPECT_NEAR(counts[0] / 4000.0, 0.727, 0.03);
}

TEST(Sampler, TemperatureMatchesSoftmax) {
  std::vector<float> logits = {0.0f, 1.0f};
  Sampler s({.temperature = 2.0f, .top_p = 1.0f, .seed = 1});
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.sample(logits) == 1;
  const double want = 1.0 / (1.0 + std::exp(-0.5));  // softmax of {0, 0.5}
  EXPECT_NEAR(ones / static_cast<double>(n), want, 0.015);
}

TEST(Sampler, RejectsBadParams) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), InvalidRequest);
  EXPECT_THROW(Sampler({.temperature = 1.0f, .top_p = 0.0f}), InvalidRequest);
  EXPECT_THROW(Sampler({.temperature = 1.0f, .top_p = 1.5f}), InvalidRequest);
}

}  // namespace
}  // namespace flashdesk
