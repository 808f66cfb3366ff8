// torch_topk against what torch.topk returned on the CPU for score rows full of exact ties
// (tests/data/torch_topk_ties.json, written by tools/torch_numerics_probe.py with torch 2.11).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/util/torch_topk.h"

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
