// The DSpark draft head (engine/model/dspark_draft.h) on a random checkpoint with three stages:
// the CPU backends agree bit for bit, seeding the rings in chunks changes nothing, and the
// outputs keep their contracts (greedy tokens are the argmax of the corrected logits).
#include <algorithm>
#include <cmath>
#include <memory>

#include "engine/model/dspark_draft.h"
#include "engine/runtime/backend_factory.h"
#include "tests/engine/dspark_test_util.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Loaded load(const std::string& backend) {
  Loaded m;
  m.backend = make_backend(backend, 2);
  m.model = std::make_unique<Model>(Checkpoint::open(dspark_every_role_dir()), *m.backend);
  return m;
}

int32_t argmax(const std::vector<float>& v, int64_t row, int64_t V) {
  const float* r = v.data() + row * V;
  return static_cast<int32_t>(std::max_element(r, r + V) - r);
}

// Prefills `prompt` in chunks of `chunk` seeding the draft rings, then `steps` times: draft after
// the last target token, decode it (its features seed the rings). Returns every draft.
std::vector<DraftBlock> drafts(Model& model, const std::vector<int32_t>& prompt, int64_t chunk,
                               int steps) {
  DsparkDrafter drafter(model);
  DraftState draft = drafter.new_state();
  SequenceState seq = model.new_sequence();
  PrefillOptions o;
  o.chunk_tokens = chunk;
  o.target_features = true;
  o.on_step = [&](const SequenceStep& s) {
    drafter.seed(draft, s.out_features, s.features_first_position);
  };
  const int64_t V = model.config().text.vocab_size;
  std::vector<float> logits = model.prefill(seq, prompt, o);
  std::vector<DraftBlock> out;
  for (int i = 0; i < steps; ++i) {
    const int32_t next = argmax(logits, 0, V);
    out.push_back(drafter.draft(draft, next));
    SequenceStep s;
    s.state = &seq;
    s.tokens = std::span<const int32_t>(&next, 1);
    s.want_features = true;
    model.step(std::span<SequenceStep>(&s, 1));
    drafter.seed(draft, s.out_features, s.features_first_position);
    logits = s.out_logits;
  }
  return out;
}

void expect_same(const std::vector<DraftBlock>& a, const std::vector<DraftBlock>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "draft " << i;
    EXPECT_EQ(a[i].logits, b[i].logits) << "draft " << i;
    EXPECT_EQ(a[i].confidence, b[i].confidence) << "draft " << i;
  }
}

TEST(DsparkDraft, CpuBackendsAgreeBitForBit) {
  Loaded ref = load("cpu-reference"), opt = load("cpu");
  // 37 tokens: the 16-slot rings wrap during the prefill and again while decoding.
  const auto prompt = test_prompt(37, ref.model->config().text.vocab_size, 5);
  expect_same(drafts(*ref.model, prompt, 0, 4), drafts(*opt.model, prompt, 0, 4));
}

TEST(DsparkDraft, ChunkedSeedingEqualsOneStep) {
  Loaded ref = load("cpu-reference");
  const auto prompt = test_prompt(37, ref.model->config().text.vocab_size, 6);
  expect_same(drafts(*ref.model, prompt, 0, 2), drafts(*ref.model, prompt, 7, 2));
}

TEST(DsparkDraft, OutputsKeepTheirContracts) {
  Loaded ref = load("cpu-reference");
  const TextConfig& t = ref.model->config().text;
  const auto prompt = test_prompt(9, t.vocab_size, 7);  // shorter than the window
  for (const DraftBlock& b : drafts(*ref.model, prompt, 0, 2)) {
    ASSERT_EQ(static_cast<int64_t>(b.tokens.size()), t.dspark_block_size);
    ASSERT_EQ(static_cast<int64_t>(b.logits.size()), t.dspark_block_size * t.vocab_size);
    ASSERT_EQ(static_cast<int64_t>(b.confidence.size()), t.dspark_block_size);
    for (int64_t i = 0; i < t.dspark_block_size; ++i) {
      EXPECT_EQ(b.tokens[static_cast<size_t>(i)], argmax(b.logits, i, t.vocab_size));
      EXPECT_TRUE(std::isfinite(b.confidence[static_cast<size_t>(i)]));
    }
  }
}

TEST(DsparkDraft, ModelWithoutHeadIsRefused) {
  LoadedModel plain = load_every_role();
  EXPECT_THROW(DsparkDrafter drafter(*plain.model), InvalidRequest);
}

}  // namespace
}  // namespace flashdesk::test
