// Greedy speculative decoding with the DSpark head (engine/model/dspark_decode.h): token for token
// the plain greedy output, in both prefill modes, on both CPU backends. The head is random, so few
// drafts are accepted; the mean accepted drafts per verify is printed for the record.
#include <iostream>
#include <memory>
#include <set>

#include "engine/model/dspark_decode.h"
#include "engine/runtime/backend_factory.h"
#include "tests/engine/dspark_test_util.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

class DsparkDecodeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { load(dspark_every_role_dir()); }
  void load(const std::filesystem::path& dir) {
    backend_ = make_backend(GetParam(), 2);
    model_ = std::make_unique<Model>(Checkpoint::open(dir), *backend_);
  }

  // forced: the first c drafts of the v-th verify are the true greedy tokens, c = v mod (k + 1),
  // so every acceptance length from none to all is verified and rolled back.
  // min_survival 0: every round verifies draft_tokens (or the block); above, the confidence
  // chooses, and the lengths it chose are returned.
  std::set<int64_t> expect_exact(int64_t prompt_len, PrefillOptions prefill, int64_t draft_tokens,
                                 bool forced = false, int64_t n = 40, double min_survival = 0.0) {
    SCOPED_TRACE("prompt " + std::to_string(prompt_len) + ", drafts " +
                 std::to_string(draft_tokens));
    const auto prompt = test_prompt(prompt_len, model_->config().text.vocab_size, 21);
    SequenceState plain_state = model_->new_sequence();
    const auto plain = greedy_plain(*model_, plain_state, prompt, n, prefill);
    DsparkDrafter drafter(*model_);
    SequenceState spec_state = model_->new_sequence();
    SpeculativeOptions o;
    o.prefill = prefill;
    o.draft_tokens = draft_tokens;
    o.min_survival = min_survival;
    int64_t verify = 0;
    std::set<int64_t> lengths;
    o.override_drafts = [&](int64_t position, std::vector<int32_t>& drafts) {
      lengths.insert(static_cast<int64_t>(drafts.size()));
      if (!forced) return;
      const auto c = static_cast<size_t>(verify++ % static_cast<int64_t>(drafts.size() + 1));
      for (size_t j = 0; j < c; ++j)
        drafts[j] = plain[static_cast<size_t>(position + 1 - prompt_len) + j];
    };
    SpeculativeStats stats;
    const auto spec = greedy_speculative(*model_, drafter, spec_state, prompt, n, o, &stats);
    EXPECT_EQ(spec, plain);
    EXPECT_EQ(spec_state.position(), plain_state.position());  // the last token is not run yet
    EXPECT_GT(stats.verifies, 0);
    if (forced) {
      EXPECT_GT(stats.accepted, 0);
    }
    if (stats.rounds > stats.verifies) lengths.insert(0);  // rounds that verified no draft
    std::cout << "[ dspark ] " << GetParam() << (forced ? " forced" : "") << " prompt "
              << prompt_len << ": " << stats.verifies << " verifies, " << stats.accepted << "/"
              << stats.drafted << " drafts accepted, mean accepted per verify "
              << stats.mean_accepted() << ", mean draft length " << stats.mean_drafted() << "\n";
    return lengths;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_P(DsparkDecodeTest, GreedyEqualsPlainGreedyExactPrefill) {
  expect_exact(21, {}, 0);
  expect_exact(22, {.chunk_tokens = 5}, 3);
}

TEST_P(DsparkDecodeTest, GreedyEqualsPlainGreedyBoundedPrefill) {
  PrefillOptions bounded;
  bounded.mode = PrefillMode::Bounded;
  expect_exact(37, bounded, 0);
}

TEST_P(DsparkDecodeTest, ForcedAcceptanceStaysExact) {
  expect_exact(21, {}, 0, true);
  expect_exact(22, {.chunk_tokens = 5}, 3, true);
  PrefillOptions bounded;
  bounded.mode = PrefillMode::Bounded;
  expect_exact(37, bounded, 4, true);
}

// The trained demo model with a random head: real text dynamics (repetitive greedy output) for the
// target, window 128, Engram and vision in the checkpoint.
TEST_P(DsparkDecodeTest, FlashTinyGreedyEqualsPlainGreedy) {
  load(flash_tiny_with_random_head_dir());
  expect_exact(40, {}, 0, false, 24);
  expect_exact(40, {}, 0, true, 24);
  PrefillOptions bounded;
  bounded.mode = PrefillMode::Bounded;
  expect_exact(150, bounded, 0, true, 24);  // longer than the window: the replay is cut
}

// The confidence head chooses each round's draft length (min_survival > 0): output stays exact.
// The random head's confidence logits spread (about -6 ... 10) so that the default threshold gives
// several lengths in one run; the test asserts that they did, forced acceptance included.
TEST_P(DsparkDecodeTest, ConfidenceChosenLengthsStayExact) {
  for (bool forced : {false, true}) {
    const std::set<int64_t> lengths = expect_exact(21, {}, 0, forced, 40, kDefaultDraftMinSurvival);
    EXPECT_GE(lengths.size(), 2u) << "the confidence chose one length only";
  }
}

// The survival rule on hand-made confidence logits: sigmoids 0.881, 0.5, 0.269, 0.953 give the
// survivals 0.881, 0.440, 0.118, 0.113.
TEST(DsparkDraftLength, LongestPrefixWhoseSurvivalStaysAboveTheThreshold) {
  const std::vector<float> c = {2.0f, 0.0f, -1.0f, 3.0f};
  EXPECT_EQ(confident_drafts(c, 4, 0.9), 0);
  EXPECT_EQ(confident_drafts(c, 4, 0.5), 1);
  EXPECT_EQ(confident_drafts(c, 4, 0.2), 2);
  EXPECT_EQ(confident_drafts(c, 4, 0.115), 3);
  EXPECT_EQ(confident_drafts(c, 4, 0.1), 4);
  EXPECT_EQ(confident_drafts(c, 2, 0.1), 2);  // capped by `most`
  EXPECT_EQ(confident_drafts(c, 3, 0.0), 3);  // 0: always `most`
}

INSTANTIATE_TEST_SUITE_P(BothCpuBackends, DsparkDecodeTest,
                         ::testing::Values("cpu-reference", "cpu"));

}  // namespace
}  // namespace flashdesk::test
