// Golden test of the demo model (issue 4 item 4): the engine's greedy ids for fixed chat prompts
// on assets/models/flash-tiny equal the PyTorch oracle's (tests/data/goldens/flash-tiny/
// greedy.json, tools/make_goldens.py), in both prefill modes, on both CPU backends. A greedy run
// may part from the oracle's only where the oracle's own top-1/top-2 gap is within its noise band:
// the largest logit change that summation order alone causes along the same ids (the oracle with
// FP32 torch-order sums, `noise_max_abs`; 1.9-5.3 logits on this trained model because FP8/FP4
// rounding flips spread, docs/goldens.md). After that the two continue from different text, so
// the comparison stops there. A second test feeds the engine the oracle's ids (teacher forcing),
// so a near-tie early on does not end the comparison: every later step whose oracle gap is outside
// the noise band must have the oracle's argmax.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/engine/golden_test_util.h"

namespace flashdesk::test {
namespace {

// Oracle top-1 minus top-2 logit below which a different choice is a near-tie whatever the noise
// band (logit units).
constexpr double kNearTie = 0.05;

class GoldenFlashTiny : public ::testing::TestWithParam<BackendMode> {};

std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& prompt, PrefillMode mode,
                            size_t steps) {
  SequenceState s = model.new_sequence();
  std::vector<int32_t> out;
  std::vector<float> logits = model.prefill(s, prompt, PrefillOptions{mode, 0, false});
  while (true) {
    out.push_back(static_cast<int32_t>(argmax(logits)));
    if (out.size() == steps) return out;
    logits = model.decode(s, out.back());
  }
}

// Argmax at each step with the oracle's ids as the decode inputs.
std::vector<int32_t> teacher_forced(Model& model, const std::vector<int32_t>& prompt,
                                    PrefillMode mode, const std::vector<int32_t>& oracle_ids) {
  SequenceState s = model.new_sequence();
  std::vector<int32_t> out;
  std::vector<float> logits = model.prefill(s, prompt, PrefillOptions{mode, 0, false});
  for (size_t i = 0;; ++i) {
    out.push_back(static_cast<int32_t>(argmax(logits)));
    if (out.size() == oracle_ids.size()) return out;
    logits = model.decode(s, oracle_ids[i]);
  }
}

// One prompt of greedy.json in one prefill mode: the oracle's ids, its top-1/top-2 gap at each
// step and the noise band below which a different choice is not a fault.
struct OracleCase {
  std::vector<int32_t> prompt, want;
  std::vector<double> gaps;
  double tie = 0.0;
  std::string label;  // the prompt's text, shortened for messages
};

struct OracleGreedy {
  size_t steps = 0;
  std::vector<OracleCase> cases;
};

OracleGreedy load_oracle_greedy(const std::string& mode) {
  std::ifstream in(golden_dir("flash-tiny") / "greedy.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  OracleGreedy g;
  g.steps = doc.at("steps").get<size_t>();
  for (const auto& c : doc.at("cases")) {
    OracleCase oc;
    oc.prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    oc.want = c.at(mode).at("ids").get<std::vector<int32_t>>();
    oc.gaps = c.at(mode).at("gaps").get<std::vector<double>>();
    oc.tie = std::max(kNearTie, c.at(mode).at("noise_max_abs").get<double>());
    oc.label = c.at("prompt").get<std::string>();
    if (oc.label.size() > 40) oc.label = oc.label.substr(0, 37) + "...";
    g.cases.push_back(std::move(oc));
  }
  return g;
}

BackendModel load_flash_tiny(const std::string& backend) {
  return load_on(std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny", backend);
}

TEST_P(GoldenFlashTiny, GreedyIdsEqualTheOracles) {
  const auto& [backend, mode] = GetParam();
  const OracleGreedy oracle = load_oracle_greedy(mode);
  BackendModel m = load_flash_tiny(backend);
  const size_t steps = oracle.steps;
  ASSERT_GE(oracle.cases.size(), 4u);
  for (const OracleCase& c : oracle.cases) {
    const auto& [prompt, want, gaps, tie, prompt_text] = c;
    ASSERT_EQ(want.size(), steps);
    const std::vector<int32_t> got = greedy(*m.model, prompt, parse_prefill_mode(mode), steps);
    const size_t first = static_cast<size_t>(
        std::mismatch(want.begin(), want.end(), got.begin()).first - want.begin());
    if (first == steps) {
      std::printf("[golden] flash-tiny %s %s \"%s\": %zu greedy ids equal\n", backend.c_str(),
                  mode.c_str(), prompt_text.c_str(), steps);
      continue;
    }
    std::printf(
        "[golden] flash-tiny %s %s \"%s\": diverges at step %zu (%d vs the oracle's %d), "
        "oracle top-2 gap %.4f (noise band %.4f)\n",
        backend.c_str(), mode.c_str(), prompt_text.c_str(), first, got[first], want[first],
        gaps[first], tie);
    EXPECT_LE(gaps[first], tie) << "\"" << prompt_text << "\": greedy id " << got[first]
                                << " at step " << first << " where the oracle chose " << want[first]
                                << " by a margin of " << gaps[first] << " (noise band " << tie
                                << ")";
  }
}

TEST_P(GoldenFlashTiny, TeacherForcedArgmaxEqualsTheOraclesOutsideTheNoiseBand) {
  const auto& [backend, mode] = GetParam();
  const OracleGreedy oracle = load_oracle_greedy(mode);
  BackendModel m = load_flash_tiny(backend);
  size_t checked = 0;
  for (const OracleCase& c : oracle.cases) {
    const auto& [prompt, want, gaps, tie, label] = c;
    const std::vector<int32_t> got =
        teacher_forced(*m.model, prompt, parse_prefill_mode(mode), want);
    size_t agree = 0, outside = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      agree += got[i] == want[i];
      if (gaps[i] <= tie) continue;
      ++outside;
      EXPECT_EQ(got[i], want[i]) << "step " << i << ": the oracle's margin " << gaps[i]
                                 << " is outside the noise band " << tie;
    }
    checked += outside;
    std::printf(
        "[golden] flash-tiny %s %s \"%s\" teacher-forced: %zu/%zu argmax equal, %zu steps "
        "outside the noise band %.2f\n",
        backend.c_str(), mode.c_str(), label.c_str(), agree, want.size(), outside, tie);
  }
  // The check must cover most steps, or a larger noise band would make it vacuous.
  EXPECT_GE(checked, oracle.cases.size() * oracle.steps / 2);
}

INSTANTIATE_TEST_SUITE_P(BothBackendsBothModes, GoldenFlashTiny, backends_and_modes(),
                         backend_mode_name);

}  // namespace
}  // namespace flashdesk::test
