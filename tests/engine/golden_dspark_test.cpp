// Golden test of the DSpark draft head: the engine's drafts on the test-dspark random checkpoint
// against the PyTorch oracle's official forward_spec (tools/dspark_goldens.py, tests/data/goldens/
// dspark/every-role.json), on both CPU backends. The same input tokens and the oracle's target
// features (teacher forced: the head alone is compared); corrected logits and confidence
// within 1.5x the oracle's noise band (its own outputs with FP32 torch-order sums); draft ids equal
// wherever the oracle's top-1/top-2 gap is outside twice that.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/model/dspark_draft.h"
#include "engine/runtime/backend_factory.h"
#include "tests/engine/dspark_test_util.h"

namespace flashdesk::test {
namespace {

// |engine - oracle| allowed on a draft logit or a confidence logit: this many times the oracle's
// own noise band (the same head with FP32 torch-order sums, as the engine sums).
constexpr double kNoiseFactor = 1.5;

class GoldenDspark : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenDspark, DraftsMatchTheOfficialForward) {
  const nlohmann::json golden = nlohmann::json::parse(
      std::ifstream(std::string(FD_SOURCE_DIR) + "/tests/data/goldens/dspark/every-role.json"));
  auto backend = make_backend(GetParam(), 2);
  Model model(Checkpoint::open(dspark_every_role_dir()), *backend);
  DsparkDrafter drafter(model);
  DraftState draft = drafter.new_state();
  // The oracle's target features seed the head: the comparison is of the head alone.
  auto seed = [&](const nlohmann::json& rows, int64_t first) {
    std::vector<float> host;
    for (const auto& r : rows)
      for (double v : r) host.push_back(static_cast<float>(v));
    const int64_t n = static_cast<int64_t>(rows.size()), T = 3, D = model.config().text.hidden_size;
    Tensor f = backend->alloc(DType::F32, Shape{n, T, D});
    backend->write(f, host.data(), host.size() * sizeof(float));
    drafter.seed(draft, f, first);
  };
  seed(golden["prompt_features"], 0);
  const int64_t V = model.config().text.vocab_size;
  const double logit_tol = kNoiseFactor * golden["noise_logits"].get<double>();
  const double conf_tol = kNoiseFactor * golden["noise_confidence"].get<double>();
  double worst_logit = 0.0, worst_conf = 0.0;
  for (const auto& step : golden["steps"]) {
    const int32_t last = step["last"];
    const DraftBlock b = drafter.draft(draft, last);
    const auto tokens = step["tokens"].get<std::vector<int32_t>>();
    const auto gaps = step["gaps"].get<std::vector<double>>();
    for (size_t i = 0; i < tokens.size(); ++i) {
      const auto row = step["logits"][i].get<std::vector<double>>();
      for (int64_t v = 0; v < V; ++v)
        worst_logit = std::max(
            worst_logit, std::abs(b.logits[i * static_cast<size_t>(V) + static_cast<size_t>(v)] -
                                  row[static_cast<size_t>(v)]));
      worst_conf =
          std::max(worst_conf, std::abs(b.confidence[i] - step["confidence"][i].get<double>()));
      if (gaps[i] > 2 * logit_tol) {
        EXPECT_EQ(b.tokens[i], tokens[i]) << "draft row " << i;
      }
      if (b.tokens[i] != tokens[i]) break;  // later rows follow other Markov tokens
    }
    seed(nlohmann::json::array({step["features"]}), draft.seeded);
  }
  std::cout << "[ dspark golden ] " << GetParam() << ": max |logit diff| " << worst_logit
            << ", max |confidence diff| " << worst_conf << "\n";
  EXPECT_LE(worst_logit, logit_tol);
  EXPECT_LE(worst_conf, conf_tol);
}

INSTANTIATE_TEST_SUITE_P(BothCpuBackends, GoldenDspark, ::testing::Values("cpu-reference", "cpu"));

}  // namespace
}  // namespace flashdesk::test
