// torch_topk against what torch.topk returned on the CPU for score rows full of exact ties
// (tests/data/torch_topk_ties.json, written by tools/torch_numerics_probe.py with torch 2.11).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>

#include "engine/util/torch_select.h"
#include "engine/util/torch_topk.h"
#include "tests/engine/torch_select_adversary.h"

namespace flashdesk {
namespace {

nlohmann::json load_fixture() {
  std::ifstream in(std::string(FD_SOURCE_DIR) + "/tests/data/torch_topk_ties.json");
  return nlohmann::json::parse(in);
}

std::vector<float> values_of(const nlohmann::json& c) {
  std::vector<float> v;
  for (const auto& x : c["values"])
    v.push_back(x.is_string() ? -std::numeric_limits<float>::infinity() : x.get<float>());
  return v;
}

TEST(TorchTopk, ReturnsTorchsIndicesUnderTies) {
  const nlohmann::json data = load_fixture();
  ASSERT_GE(data["cases"].size(), 90u);
  int checked = 0, with_ties_at_the_cut = 0;
  for (const auto& c : data["cases"]) {
    const std::vector<float> v = values_of(c);
    const int64_t k = c["k"].get<int64_t>();
    for (const bool sorted : {false, true}) {
      const auto want = c[sorted ? "sorted" : "unsorted"].get<std::vector<int32_t>>();
      EXPECT_EQ(torch_topk(v, k, sorted), want)
          << "n " << v.size() << " k " << k << " sorted " << sorted << " " << c["dtype"];
      ++checked;
    }
    // The fixture must exercise ties across the cut, or it proves nothing about tie-breaking.
    std::vector<float> s = v;
    std::sort(s.begin(), s.end(), std::greater<>());
    if (static_cast<size_t>(k) < s.size() && s[k - 1] == s[k]) ++with_ties_at_the_cut;
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(data["cases"].size()));
  EXPECT_GT(with_ties_at_the_cut, 60);
}

// torch's selection with libstdc++'s own algorithms, as torch calls them.
std::vector<int32_t> with_the_standard_library(const std::vector<float>& v, int64_t k,
                                               bool sorted) {
  using Elem = std::pair<float, int64_t>;
  std::vector<Elem> q(v.size());
  for (size_t j = 0; j < v.size(); ++j) q[j] = {v[j], static_cast<int64_t>(j)};
  auto larger = [](const Elem& x, const Elem& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (k * 64 <= static_cast<int64_t>(q.size())) {
    std::partial_sort(q.begin(), q.begin() + k, q.end(), larger);
  } else {
    std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), larger);
    if (sorted) std::sort(q.begin(), q.begin() + (k - 1), larger);
  }
  std::vector<int32_t> out;
  for (int64_t j = 0; j < k; ++j)
    out.push_back(static_cast<int32_t>(q[static_cast<size_t>(j)].second));
  return out;
}

// The step-by-step port (engine/util/torch_select.h, also the CUDA backend's) against the
// standard library on rows of few distinct values, where almost every choice is a tie: sizes
// from 1 to 20,000, k across both of torch's paths, depth limits reached by adversarial rows.
TEST(TorchTopk, StepByStepPortMatchesTheStandardLibrary) {
  std::mt19937 rng(123);
  int rows = 0;
  for (const int64_t n : {1, 2, 3, 4, 5, 16, 17, 33, 100, 384, 385, 1000, 4096, 20000}) {
    for (int distinct : {1, 2, 7, 300}) {
      std::uniform_int_distribution<int> level(0, distinct - 1);
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = static_cast<float>(level(rng)) * 0.25f;
      if (n > 50 && distinct == 300) v[static_cast<size_t>(n / 2)] = std::nanf("");
      for (const int64_t k :
           {int64_t{1}, int64_t{2}, int64_t{6}, n / 64, n / 63 + 1, n / 2, n - 1, n}) {
        if (k < 1 || k > n) continue;
        for (const bool sorted : {false, true}) {
          ASSERT_EQ(torch_topk(v, k, sorted), with_the_standard_library(v, k, sorted))
              << "n " << n << " distinct " << distinct << " k " << k << " sorted " << sorted;
          ++rows;
        }
      }
    }
  }
  // Rows that drive introselect into its heap-select fallback (McIlroy's adversary), with pairs
  // of equal values so that the fallback's tie choices matter.
  for (const int64_t n : {200, 1000, 5000})
    for (const int64_t k : {n / 3, n / 2, n - 1}) {
      const std::vector<float> v = test::adversarial_row(n, [&](auto& idx, auto cmp) {
        std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), cmp);
        std::sort(idx.begin(), idx.begin() + (k - 1), cmp);
      });
      ASSERT_EQ(torch_topk(v, k, true), with_the_standard_library(v, k, true)) << "n " << n;
      ++rows;
    }
  EXPECT_GT(rows, 500);
}

// The introsort of torch's sorted path on rows that exhaust its depth limit (McIlroy's adversary
// against std::sort, values halved into pairs of ties): the port's sort against std::sort.
TEST(TorchTopk, StepByStepSortMatchesTheStandardLibraryPastItsDepthLimit) {
  for (const int64_t n : {200, 1000, 5000}) {
    const std::vector<float> v = test::adversarial_row(
        n, [](auto& idx, auto cmp) { std::sort(idx.begin(), idx.end(), cmp); });
    std::vector<torch_select::Scored> mine(v.size());
    for (size_t i = 0; i < v.size(); ++i) mine[i] = {v[i], static_cast<int32_t>(i)};
    std::vector<torch_select::Scored> theirs = mine;
    torch_select::sort(mine.data(), mine.data() + n);
    std::sort(theirs.begin(), theirs.end(), torch_select::before);
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(mine[i].index, theirs[i].index) << "n " << n;
  }
}

TEST(TorchTopk, PlainOrderWithoutTies) {
  const std::vector<float> v = {0.5f, 3.0f, -1.0f, 2.0f, 7.0f};
  EXPECT_EQ(torch_topk(v, 3, true), (std::vector<int32_t>{4, 1, 3}));
  EXPECT_TRUE(torch_topk(v, 0, true).empty());
  EXPECT_EQ(torch_topk(v, 9, true).size(), 5u);
}

// Six routing weights whose sum depends on the order: torch's order (measured, torch_topk.h) and
// index order give different FP32 sums here, so the test tells them apart.
TEST(TorchRowSum, SixValuesInTorchsOrder) {
  const std::vector<float> w = {1.0f, 1e-8f, 1e-8f, 1e-8f, -1.0f, 3e-8f};
  const float torch_order = ((((w[0] + w[4]) + w[5]) + w[1]) + w[2]) + w[3];
  float index_order = 0.0f;
  for (float v : w) index_order += v;
  ASSERT_NE(torch_order, index_order);
  EXPECT_EQ(torch_row_sum(w), torch_order);
  const std::vector<float> two = {0.25f, 0.5f};
  EXPECT_EQ(torch_row_sum(two), 0.75f);
}

}  // namespace
}  // namespace flashdesk
