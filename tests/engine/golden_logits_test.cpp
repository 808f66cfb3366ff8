// End-to-end golden test (issue 3 item 5): on the every-role random checkpoint, the engine's
// prefill logits (320-token prompt) and teacher-forced decode logits (the oracle's 32 greedy ids
// fed back) against the PyTorch oracle's (tools/make_goldens.py), both prefill modes, both CPU
// backends.
//
// On a random checkpoint these logits are chaotic: one-ulp summation differences flip FP8/FP4
// roundings and top-k choices that spread through the KV caches, so the oracle run with FP32
// torch-order sums (noise-*.safetensors, another faithful implementation) is ~0.4 relative RMS away
// from the golden, further than the oracle with a whole block skipped. The end-to-end bound is
// therefore "no further from the oracle than the oracle is from itself" (docs/goldens.md); the
// discriminating check is golden_blocks_test.cpp (every block fed the oracle's input).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "tests/engine/golden_test_util.h"

namespace flashdesk::test {
namespace {

// The engine's relative RMS error over all 33 rows may be at most this multiple of the noise
// band (the reordered-sum oracle's error against the golden).
constexpr double kNoiseFactor = 1.5;
// Cosine similarity of all rows together: a broken forward decorrelates the logits.
constexpr double kMinCosine = 0.8;

class GoldenLogits : public ::testing::TestWithParam<BackendMode> {};

struct Logits {
  std::vector<float> rows;  // prefill row, then one row per decode step, [33 * V]
};

Logits golden_rows(const NamedTensors& g) {
  Logits l{floats(g, "prefill_logits")};
  const std::vector<float> d = floats(g, "decode_logits");
  l.rows.insert(l.rows.end(), d.begin(), d.end());
  return l;
}

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

int argmax_agreement(std::span<const float> a, std::span<const float> b, size_t V) {
  int n = 0;
  for (size_t r = 0; r + V <= a.size(); r += V)
    n += argmax(a.subspan(r, V)) == argmax(b.subspan(r, V));
  return n;
}

TEST_P(GoldenLogits, WithinTheOraclesOwnSummationOrderNoise) {
  const auto& [backend, mode] = GetParam();
  const auto dir = golden_dir("every-role");
  const NamedTensors g = load_golden(dir / ("logits-" + mode + ".safetensors"));
  const NamedTensors noise = load_golden(dir / ("noise-" + mode + ".safetensors"));
  const std::vector<int32_t> prompt = ids(g, "prompt_ids"), forced = ids(g, "decode_input_ids");
  ASSERT_GE(prompt.size(), 256u);
  ASSERT_EQ(forced.size(), 32u);
  ASSERT_EQ(ids(noise, "decode_input_ids"), forced);
  const Logits want = golden_rows(g), other = golden_rows(noise);

  BackendModel m = load_on(golden_every_role_model(), backend);
  const size_t V = static_cast<size_t>(m.model->config().text.vocab_size);
  ASSERT_EQ(want.rows.size(), V * 33);
  ASSERT_EQ(other.rows.size(), want.rows.size());
  SequenceState s = m.model->new_sequence();
  Logits got{m.model->prefill(s, prompt, PrefillOptions{parse_prefill_mode(mode), 0, false})};
  for (int32_t id : forced) {
    const std::vector<float> row = m.model->decode(s, id);
    got.rows.insert(got.rows.end(), row.begin(), row.end());
  }
  ASSERT_EQ(got.rows.size(), want.rows.size());

  const double err = relative_rms(want.rows, got.rows);
  const double band = relative_rms(want.rows, other.rows);
  const double cos = cosine(want.rows, got.rows);
  EXPECT_GT(band, 0.0) << "the noise file should differ from the golden";
  EXPECT_LE(err, kNoiseFactor * band) << "engine vs oracle beyond the oracle's own noise band";
  EXPECT_GE(cos, kMinCosine);
  std::printf(
      "[golden] %s %s: %zu prompt + %zu forced steps: rel RMS %.3e (oracle noise band "
      "%.3e), cosine %.4f, argmax equal %d/33 (noise %d/33)\n",
      backend.c_str(), mode.c_str(), prompt.size(), forced.size(), err, band, cos,
      argmax_agreement(want.rows, got.rows, V), argmax_agreement(want.rows, other.rows, V));
}

INSTANTIATE_TEST_SUITE_P(BothBackendsBothModes, GoldenLogits, backends_and_modes(),
                         backend_mode_name);

}  // namespace
}  // namespace flashdesk::test
