// The DSpark draft's three paths on every backend of the machine (the CUDA backend too where there
// is a GPU or the cuda-emu build's emulation): a greedy draft that drops its logits, one that keeps
// them and one whose picker takes each row's argmax on the host agree bit for bit, so the Markov
// chain run on the backend (embed_rows, add_argmax) is the host's rule. On the CUDA backend a
// greedy draft waits for the device once (it waited 2B + 3 times when the Markov rows ran through
// the host), a greedy round twice, and greedy speculative decoding gives the plain greedy ids.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "engine/model/dspark_decode.h"
#include "engine/runtime/backend_factory.h"
#include "tests/engine/dspark_test_util.h"
#include "tests/engine/golden_test_util.h"
#include "tests/engine/model_test_util.h"
#ifdef FLASHDESK_HAVE_CUDA
#include "engine/ops/cuda/cuda_backend.h"
#endif

namespace flashdesk::test {
namespace {

// Prompt and output lengths: short, because the CUDA emulation runs a step of this model in
// seconds (a GPU or a CPU backend in milliseconds); long enough for a round to accept and reject.
constexpr int64_t kPrompt = 4, kTokens = 8;

class DsparkDeviceDraft : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = make_backend(GetParam(), 2);
    model_ = std::make_unique<Model>(Checkpoint::open(dspark_every_role_dir()), *backend_);
    drafter_ = std::make_unique<DsparkDrafter>(*model_);
  }

  // Prefills a prompt into seq_, seeding the draft rings; next_ is the target's next token.
  void prefill() {
    draft_ = drafter_->new_state();
    seq_ = model_->new_sequence();
    PrefillOptions o;
    o.target_features = true;
    o.on_step = [&](const SequenceStep& s) {
      drafter_->seed(draft_, s.out_features, s.features_first_position);
    };
    const std::vector<float> logits =
        model_->prefill(seq_, test_prompt(kPrompt, model_->config().text.vocab_size, 5), o);
    next_ = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }

  // Host waits of the CUDA backend so far; -1 on the others.
  int64_t host_syncs() const {
#ifdef FLASHDESK_HAVE_CUDA
    if (const auto* cuda = dynamic_cast<const CudaBackend*>(backend_.get()))
      return static_cast<int64_t>(cuda->host_syncs());
#endif
    return -1;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<DsparkDrafter> drafter_;
  DraftState draft_;
  SequenceState seq_;
  int32_t next_ = 0;
};

TEST_P(DsparkDeviceDraft, GreedyPathsAndTheArgmaxPickerAgreeBitForBit) {
  prefill();
  const int64_t B = drafter_->block_size(), V = model_->config().text.vocab_size;
  const int64_t before = host_syncs();
  const DraftBlock dropped = drafter_->draft(draft_, next_, {}, DraftLogits::Dropped);
  const int64_t after_dropped = host_syncs();
  const DraftBlock kept = drafter_->draft(draft_, next_);
  const int64_t after_kept = host_syncs();
  const DraftPicker argmax = [](int64_t, std::span<const float> row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
  };
  const DraftBlock picked = drafter_->draft(draft_, next_, argmax);
  const int64_t after_picked = host_syncs();

  ASSERT_EQ(static_cast<int64_t>(kept.tokens.size()), B);
  EXPECT_TRUE(dropped.logits.empty());
  EXPECT_EQ(dropped.tokens, kept.tokens);
  EXPECT_EQ(dropped.confidence, kept.confidence);
  EXPECT_EQ(picked.tokens, kept.tokens);
  EXPECT_EQ(picked.logits, kept.logits);
  EXPECT_EQ(picked.confidence, kept.confidence);
  ASSERT_EQ(static_cast<int64_t>(kept.logits.size()), B * V);
  for (int64_t i = 0; i < B; ++i) {
    const auto row = kept.logits.begin() + i * V;
    EXPECT_EQ(kept.tokens[static_cast<size_t>(i)], std::max_element(row, row + V) - row);
  }
  if (before < 0) return;
  EXPECT_EQ(after_dropped - before, 1) << "a greedy draft reads back once";
  EXPECT_EQ(after_kept - after_dropped, 1) << "its logits come in the same read";
  EXPECT_EQ(after_picked - after_kept, B + 1) << "a picker reads each row, then the rest once";
}

// A greedy round waits for the device twice: the draft's read-back and the verify step's logits
// (the Engram layers' hash ids stay on the host; keeping rows queues work only).
TEST_P(DsparkDeviceDraft, AGreedyRoundWaitsForTheDeviceTwice) {
  prefill();
  const int64_t most = most_drafts(*model_, *drafter_);
  const int64_t before = host_syncs();
  const VerifyRound r = verify_round(*model_, *drafter_, draft_, seq_, next_, most, {0.0});
  const int64_t after_verify = host_syncs();
  keep_rows(*model_, *drafter_, draft_, seq_, r, static_cast<int64_t>(r.tokens.size()));
  EXPECT_EQ(r.drafted, most);
  if (before < 0) return;
  EXPECT_EQ(after_verify - before, 2);
  EXPECT_EQ(host_syncs(), after_verify);
}

TEST_P(DsparkDeviceDraft, GreedySpeculativeEqualsPlainGreedy) {
#ifdef FLASHDESK_CUDA_EMU
  // About 6 minutes on the emulation (it passed there when written); a GPU runs it at once.
  if (GetParam().starts_with("cuda") && !std::getenv("FLASHDESK_EMU_FULL"))
    GTEST_SKIP() << "slow on the CUDA emulation; set FLASHDESK_EMU_FULL=1 to run it";
#endif
  const auto prompt = test_prompt(kPrompt, model_->config().text.vocab_size, 21);
  SequenceState plain_state = model_->new_sequence();
  const auto plain = greedy_plain(*model_, plain_state, prompt, kTokens);
  SequenceState spec_state = model_->new_sequence();
  SpeculativeOptions o;
  o.min_survival = 0.0;  // every round verifies the whole block
  SpeculativeStats stats;
  const auto spec = greedy_speculative(*model_, *drafter_, spec_state, prompt, kTokens, o, &stats);
  EXPECT_EQ(spec, plain);
  EXPECT_GT(stats.verifies, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, DsparkDeviceDraft, ::testing::ValuesIn(golden_backends()));

}  // namespace
}  // namespace flashdesk::test
