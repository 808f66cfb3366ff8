// Sampler: greedy ties, determinism by seed, nucleus truncation and the empirical distribution.
#include <gtest/gtest.h>

#include <algorithm>
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

// distribution() orders only as far as the nucleus reaches (growing partial sorts): on a vocabulary
// much larger than one step, it equals the nucleus of a full sort, and sample() draws only from it.
TEST(Sampler, DistributionIsTheFullSortNucleusOnALargeVocabulary) {
  std::vector<float> logits(5000);
  uint32_t x = 12345;
  for (float& l : logits) {  // a fixed pseudo-random spread of about 8 nats
    x = x * 1664525u + 1013904223u;
    l = static_cast<float>(x >> 8) / static_cast<float>(1u << 24) * 8.0f;
  }
  const float temperature = 1.5f, top_p = 0.9f;
  std::vector<std::pair<double, int64_t>> order;
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    order.emplace_back(std::exp((logits[i] - 8.0) / temperature), static_cast<int64_t>(i));
    total += order.back().first;
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<double> want(logits.size(), 0.0);
  double mass = 0.0, kept = 0.0;
  size_t n = 0;
  while (mass < top_p) {
    mass += order[n].first / total;
    kept += order[n].first;
    ++n;
  }
  ASSERT_GT(n, 1024u);  // beyond the partial sorts, into the sort of the rest
  for (size_t i = 0; i < n; ++i) want[static_cast<size_t>(order[i].second)] = order[i].first / kept;
  Sampler s({.temperature = temperature, .top_p = top_p, .seed = 4});
  const std::vector<double> got = s.distribution(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    EXPECT_EQ(got[i] > 0.0, want[i] > 0.0) << "id " << i;
    EXPECT_NEAR(got[i], want[i], 1e-6 * want[i] + 1e-12) << "id " << i;
  }
  for (int i = 0; i < 200; ++i) EXPECT_GT(want[static_cast<size_t>(s.sample(logits))], 0.0);
}

}  // namespace
}  // namespace flashdesk
