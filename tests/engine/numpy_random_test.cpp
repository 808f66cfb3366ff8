// The numpy port (engine/util/numpy_random) and the Engram multipliers against what numpy 1.24
// printed for the same cases (tests/data/numpy_random/expected.json, made by
// tools/numpy_random_fixture.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "engine/checkpoint/engram_multipliers.h"
#include "engine/util/numpy_random.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

using nlohmann::json;

const json& expected() {
  static const json j = json::parse(testing::read_text(std::filesystem::path(FD_SOURCE_DIR) /
                                                       "tests/data/numpy_random/expected.json"));
  return j;
}

uint64_t u64(const json& v) {
  return std::stoull(v.get<std::string>());
}
int64_t i64(const json& v) {
  return std::stoll(v.get<std::string>());
}

template <typename T, typename F>
std::vector<T> all(const json& list, F convert) {
  std::vector<T> out;
  for (const json& v : list) out.push_back(convert(v));
  return out;
}

TEST(NumpyRandom, SeedSequenceStateMatchesNumpy) {
  for (const json& c : expected().at("seed_state")) {
    const auto state = numpy_random::seed_sequence_state(u64(c.at("seed")));
    EXPECT_EQ(std::vector<uint64_t>(state.begin(), state.end()), all<uint64_t>(c.at("state"), u64))
        << "seed " << c.at("seed");
  }
}

TEST(NumpyRandom, Pcg64RawOutputsMatchNumpy) {
  for (const json& c : expected().at("raw")) {
    numpy_random::Pcg64 g(u64(c.at("seed")));
    std::vector<uint64_t> got;
    for (size_t i = 0; i < c.at("values").size(); ++i) got.push_back(g.next64());
    EXPECT_EQ(got, all<uint64_t>(c.at("values"), u64)) << "seed " << c.at("seed");
  }
}

TEST(NumpyRandom, IntegersMatchNumpyOnEveryPath) {
  const size_t size = expected().at("size").get<size_t>();
  size_t cases = 0;
  for (const json& c : expected().at("integers")) {
    numpy_random::Pcg64 g(u64(c.at("seed")));
    EXPECT_EQ(numpy_random::integers(g, i64(c.at("low")), i64(c.at("high")), size),
              all<int64_t>(c.at("values"), i64))
        << "seed " << c.at("seed") << " low " << c.at("low") << " high " << c.at("high");
    ++cases;
  }
  EXPECT_GE(cases, 200u);  // the fixture covers every seed x bound
}

TEST(NumpyRandom, HalfUsedBufferCarriesOverBetweenCalls) {
  for (const json& c : expected().at("sequential")) {
    numpy_random::Pcg64 g(u64(c.at("seed")));
    std::vector<int64_t> got = numpy_random::integers(g, 0, 10, 3);
    for (int64_t v : numpy_random::integers(g, 0, 10, 3)) got.push_back(v);
    for (int64_t v : numpy_random::integers(g, 0, int64_t{1} << 40, 2)) got.push_back(v);
    EXPECT_EQ(got, all<int64_t>(c.at("values"), i64)) << "seed " << c.at("seed");
  }
}

TEST(EngramMultipliers, MatchTheOfficialRule) {
  for (const json& c : expected().at("multipliers")) {
    const auto layers = c.at("layer_ids").get<std::vector<int64_t>>();
    const auto got = engram_multipliers(layers, c.at("max_ngram_size").get<int64_t>(),
                                        c.at("compressed_vocab_size").get<int64_t>());
    ASSERT_EQ(got.size(), layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      EXPECT_EQ(got[l], all<int64_t>(c.at("values")[l], i64)) << "layer " << layers[l];
      for (int64_t m : got[l]) EXPECT_EQ(m % 2, 1);
    }
  }
}

}  // namespace
}  // namespace flashdesk
