// Golden test of the DSpark draft head against the official DeepSeek-V4.1 code itself: its
// Transformer.forward_spec (inference/model.py, HF revision dba1be0a) run by
// tools/official_dspark_goldens.py on the GPU machine (tools/gpu/official_dspark.sh) on the
// test-dspark random checkpoint (make-random seed 3, regenerated here with the C++ writer and
// checked against the manifest's SHA-256). Files: tests/data/goldens/dspark/
// official-every-role.safetensors and official-manifest.json; the tests skip while they are
// absent. Every backend of the machine (cuda too where there is a GPU).
//
// Two cases, a prompt longer than the 16-slot window (37 ids, 6 drafts) and a shorter one (7
// ids, 4 drafts, the official key list min(W, start_pos + 1) shorter than the ring). The engine
// is seeded with the official target features (teacher forced: the head alone is compared, the
// main forward's own rounding noise stays out, docs/goldens.md), in the official order: each
// decode step's feature row is seeded, then the block [the target's next token, noise x 4] is
// drafted. Corrected logits and confidence logits must lie within 1.5x the official head's own
// noise band (the largest change the official head shows with only its summation order or
// precision changed: FP8/FP4 GEMMs summed exactly or in reverse K-block order, dense linears in
// FP64 or other FP32 orders, the attention's FP32 sums in other orders;
// tools/official_dspark_goldens.py, docs/goldens.md "The real run"), and at least 1e-3; draft ids
// must be equal wherever the official top-1/top-2 gap is outside twice that. Rows after a differing
// id follow another Markov token and are not compared.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/dspark_draft.h"
#include "tests/engine/dspark_test_util.h"
#include "tests/engine/golden_test_util.h"

namespace flashdesk::test {
namespace {

// |engine - official| allowed on a draft logit or a confidence logit: this many times the
// official head's own noise band, and never below kFloor (a band measured without a single
// rounding flip would otherwise leave only FP32 rounding of the last sums).
constexpr double kNoiseFactor = 1.5;
constexpr double kFloor = 1e-3;

const std::filesystem::path& golden_file() {
  static const std::filesystem::path p = golden_dir("dspark") / "official-every-role.safetensors";
  return p;
}

const std::filesystem::path& manifest_file() {
  static const std::filesystem::path p = golden_dir("dspark") / "official-manifest.json";
  return p;
}

double top_gap(const std::vector<float>& logits, size_t row, size_t V) {
  std::vector<float> r(logits.begin() + static_cast<std::ptrdiff_t>(row * V),
                       logits.begin() + static_cast<std::ptrdiff_t>((row + 1) * V));
  std::partial_sort(r.begin(), r.begin() + 2, r.end(), std::greater<float>());
  return static_cast<double>(r[0]) - static_cast<double>(r[1]);
}

class GoldenDsparkOfficial : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(golden_file()) || !std::filesystem::exists(manifest_file()))
      GTEST_SKIP() << golden_file() << " or " << manifest_file()
                   << " is not there: the goldens of the official code are made on the GPU "
                      "machine (tools/gpu/official_dspark.sh, docs/goldens.md)";
    golden_ = load_golden(golden_file());
    manifest_ = nlohmann::json::parse(std::ifstream(manifest_file()));
    const std::filesystem::path& dir = dspark_every_role_dir();
    ASSERT_EQ(file_sha256(dir / "model.safetensors"),
              manifest_["checkpoint_sha256"]["model.safetensors"].get<std::string>())
        << "the random checkpoint writer changed since the official DSpark goldens were made: "
           "regenerate them (tools/gpu/official_dspark.sh)";
    m_ = load_on(dir, GetParam());
  }

  Tensor features(const std::vector<float>& host, int64_t rows) {
    const TextConfig& t = m_.model->config().text;
    const int64_t T = static_cast<int64_t>(t.dspark_target_layer_ids.size());
    Tensor f = m_.backend->alloc(DType::F32, Shape{rows, T, t.hidden_size});
    EXPECT_EQ(host.size() * sizeof(float), f.nbytes());
    m_.backend->write(f, host.data(), f.nbytes());
    return f;
  }

  NamedTensors golden_;
  nlohmann::json manifest_;
  BackendModel m_;
};

TEST_P(GoldenDsparkOfficial, DraftsMatchTheOfficialForwardSpec) {
  const TextConfig& t = m_.model->config().text;
  const size_t V = static_cast<size_t>(t.vocab_size), B = static_cast<size_t>(t.dspark_block_size);
  const size_t row_numel = t.dspark_target_layer_ids.size() * static_cast<size_t>(t.hidden_size);
  const double logit_tol = std::max(kFloor, kNoiseFactor * floats(golden_, "noise_logits").at(0));
  const double conf_tol =
      std::max(kFloor, kNoiseFactor * floats(golden_, "noise_confidence").at(0));
  DsparkDrafter drafter(*m_.model);
  for (const std::string c : {"long", "short"}) {
    SCOPED_TRACE("case " + c);
    const int64_t P = static_cast<int64_t>(ints(golden_, c + "_prompt_ids").size());
    const std::vector<float> step_features = floats(golden_, c + "_step_features");
    const std::vector<int32_t> last = ids(golden_, c + "_draft_last");
    const std::vector<int32_t> want_ids = ids(golden_, c + "_draft_ids");
    const std::vector<float> want_logits = floats(golden_, c + "_draft_logits");
    const std::vector<float> want_conf = floats(golden_, c + "_draft_confidence");
    const size_t S = last.size();
    ASSERT_EQ(step_features.size(), S * row_numel);
    ASSERT_EQ(want_ids.size(), S * B);
    ASSERT_EQ(want_logits.size(), S * B * V);

    DraftState state = drafter.new_state();
    drafter.seed(state, features(floats(golden_, c + "_prompt_features"), P), 0);
    double worst_logit = 0.0, worst_conf = 0.0;
    size_t compared_rows = 0, checked_ids = 0;
    for (size_t s = 0; s < S; ++s) {
      // the official decode step: the fed token's feature row into the rings, then the draft
      // after it
      const std::vector<float> row(
          step_features.begin() + static_cast<std::ptrdiff_t>(s * row_numel),
          step_features.begin() + static_cast<std::ptrdiff_t>((s + 1) * row_numel));
      drafter.seed(state, features(row, 1), P + static_cast<int64_t>(s));
      const DraftBlock b = drafter.draft(state, last[s]);
      ASSERT_EQ(b.tokens.size(), B);
      double step_logit = 0.0, step_conf = 0.0;
      for (size_t i = 0; i < B; ++i) {
        const size_t r = s * B + i;
        for (size_t v = 0; v < V; ++v)
          step_logit = std::max(step_logit, std::abs(static_cast<double>(b.logits[i * V + v]) -
                                                     want_logits[r * V + v]));
        step_conf =
            std::max(step_conf, std::abs(static_cast<double>(b.confidence[i]) - want_conf[r]));
        ++compared_rows;
        if (top_gap(want_logits, r, V) > 2 * logit_tol) {
          ++checked_ids;
          EXPECT_EQ(b.tokens[i], want_ids[r]) << "step " << s << ", draft row " << i;
        }
        if (b.tokens[i] != want_ids[r]) break;  // later rows follow another Markov token
      }
      std::printf(
          "[ dspark official ] %s, %s, step %zu (draft positions %lld..): max |logit diff| "
          "%.5g, max |confidence diff| %.5g\n",
          GetParam().c_str(), c.c_str(), s, static_cast<long long>(P + 1 + s), step_logit,
          step_conf);
      worst_logit = std::max(worst_logit, step_logit);
      worst_conf = std::max(worst_conf, step_conf);
    }
    std::printf(
        "[ dspark official ] %s, %s: %zu rows, %zu ids checked; max |logit diff| %.5g "
        "(bound %.5g), max |confidence diff| %.5g (bound %.5g)\n",
        GetParam().c_str(), c.c_str(), compared_rows, checked_ids, worst_logit, logit_tol,
        worst_conf, conf_tol);
    EXPECT_GT(checked_ids, 0u);
    EXPECT_LE(worst_logit, logit_tol);
    EXPECT_LE(worst_conf, conf_tol);
  }
}

// The target features: the official h.mean(dim=2) of each target layer's bf16 input streams is
// what the engine's collapse with weights 1/hc (engine/model/dspark_features.cpp) gives on the
// same streams, bit for bit (the sum of hc = 4 bf16 values is exact in FP32 in practice, and a
// power-of-two scale commutes with the bf16 rounding).
TEST_P(GoldenDsparkOfficial, TargetFeaturesAreTheOfficialStreamMean) {
  const TextConfig& t = m_.model->config().text;
  const int64_t T = static_cast<int64_t>(t.dspark_target_layer_ids.size());
  const int64_t hc = t.hc_mult, D = t.hidden_size;
  for (const std::string c : {"long", "short"}) {
    SCOPED_TRACE("case " + c);
    const std::vector<float> streams = floats(golden_, c + "_target_inputs");
    std::vector<float> want = floats(golden_, c + "_prompt_features");
    const std::vector<float> steps = floats(golden_, c + "_step_features");
    want.insert(want.end(), steps.begin(), steps.end());
    const int64_t n = static_cast<int64_t>(want.size()) / D;  // rows x targets
    ASSERT_EQ(static_cast<int64_t>(streams.size()), n * hc * D);
    ASSERT_EQ(n % T, 0);
    Tensor X = m_.backend->alloc(DType::F32, Shape{n, hc, D});
    m_.backend->write(X, streams.data(), X.nbytes());
    std::vector<float> weights(static_cast<size_t>(n * hc), 1.0f / static_cast<float>(hc));
    Tensor w = m_.backend->alloc(DType::F32, Shape{n, hc});
    m_.backend->write(w, weights.data(), w.nbytes());
    Tensor mean = m_.backend->alloc(DType::F32, Shape{n, D});
    m_.backend->hc_collapse(X, w, mean);
    std::vector<float> got(want.size());
    m_.backend->read(mean, got.data(), mean.nbytes());
    size_t differing = 0;
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      differing += got[i] != want[i];
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
    }
    EXPECT_EQ(differing, 0u) << "of " << got.size() << " feature values; largest difference "
                             << worst;
  }
}

std::string backend_name(const ::testing::TestParamInfo<std::string>& p) {
  std::string name = p.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Backends, GoldenDsparkOfficial, ::testing::ValuesIn(golden_backends()),
                         backend_name);

}  // namespace
}  // namespace flashdesk::test
