// The generation loop with speculative decoding (engine/runtime/generator.h, `speculative`):
// on flash-tiny with a random DSpark head, the same ids, finish reason and state as plain greedy
// for answers that end at EOS and at the token budget, with forced budgets that cut a verify's
// accepted tokens short. The sampled distribution is tested in dspark_sampling_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "engine/runtime/generator.h"
#include "engine/tokenizer/special_tokens.h"
#include "tests/engine/dspark_test_util.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

struct Generated {
  std::vector<TokenId> ids;
  FinishReason finish;
  std::vector<int32_t> state_tokens;
  GenerationStats stats;
};

class DsparkGenerator : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = new CpuReferenceBackend(2);
    model_ = new Model(Checkpoint::open(flash_tiny_with_random_head_dir()), *backend_);
    tokenizer_ =
        new Tokenizer(Tokenizer::from_file(flash_tiny_with_random_head_dir() / "tokenizer.json"));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
    delete backend_;
  }

  // forced: the drafts are the plain answer's tokens (all accepted, EOS among them).
  Generated generate(const std::vector<TokenId>& prompt, int64_t max_new, bool speculative,
                     const std::vector<TokenId>* forced = nullptr) {
    Generator g(*model_, *tokenizer_);
    SequenceState s = model_->new_sequence();
    GenerationOptions o;
    o.max_new_tokens = max_new;
    o.speculative = speculative;
    o.ignore_eos = ignore_eos_;
    if (forced)
      o.override_drafts = [&](int64_t position, std::vector<int32_t>& drafts) {
        for (size_t j = 0; j < drafts.size(); ++j) {
          const auto at = static_cast<size_t>(position + 1) - prompt.size() + j;
          if (at < forced->size()) drafts[j] = (*forced)[at];
        }
      };
    std::vector<TokenId> ids;
    StreamCallbacks cb;
    cb.on_token = [&](TokenId id) { ids.push_back(id); };
    GenerationResult r = g.generate(s, prompt, o, cb);
    return Generated{ids, r.finish, s.tokens, r.stats};
  }

  void expect_same(const std::vector<TokenId>& prompt, int64_t max_new) {
    SCOPED_TRACE("max_new " + std::to_string(max_new));
    const Generated plain = generate(prompt, max_new, false),
                    spec = generate(prompt, max_new, true);
    EXPECT_EQ(spec.ids, plain.ids);
    EXPECT_EQ(spec.finish, plain.finish);
    EXPECT_EQ(spec.state_tokens, plain.state_tokens);  // EOS and the last token never enter
    EXPECT_EQ(spec.stats.generated_tokens, plain.stats.generated_tokens);
    const Generated forced = generate(prompt, max_new, true, &plain.ids);
    EXPECT_EQ(forced.ids, plain.ids);
    EXPECT_EQ(forced.finish, plain.finish);
    EXPECT_EQ(forced.state_tokens, plain.state_tokens);
    if (max_new > 2) {
      EXPECT_GT(forced.stats.accepted, 0);
    }
  }

  bool ignore_eos_ = false;
  static CpuReferenceBackend* backend_;
  static Model* model_;
  static Tokenizer* tokenizer_;
};
CpuReferenceBackend* DsparkGenerator::backend_ = nullptr;
Model* DsparkGenerator::model_ = nullptr;
Tokenizer* DsparkGenerator::tokenizer_ = nullptr;

TEST_F(DsparkGenerator, SameAnswerAsPlainGreedy) {
  const std::vector<TokenId> prompt = tokenizer_->encode("What is the capital of France?");
  for (int64_t max_new : {1, 2, 7, 64}) expect_same(prompt, max_new);
}

TEST_F(DsparkGenerator, AnswerEndingAtEosInsideTheDrafts) {
  // A prompt whose greedy answer ends with EOS well inside the budget.
  std::vector<TokenId> prompt = tokenizer_->encode("What is the capital of France?");
  for (int64_t budget : {64, 200}) {
    const Generated plain = generate(prompt, budget, false);
    if (plain.finish != FinishReason::kEos) continue;
    expect_same(prompt, budget);
    return;
  }
  GTEST_SKIP() << "no answer of this prompt ends at EOS";
}

// ignore_eos (vLLM's request option, for answers of a set length): generation goes on past EOS
// to the budget, plain and speculative alike, with the plain answer's EOS where it was.
TEST_F(DsparkGenerator, IgnoringEosGoesOnToTheBudget) {
  const std::vector<TokenId> prompt = tokenizer_->encode(
      std::string(spelling::kBos) + std::string(spelling::kUser) +
      "Hi! My name is Quinn. What is my name?" + std::string(spelling::kAssistant) + "</think>");
  const Generated ends = generate(prompt, 64, false);
  ASSERT_EQ(ends.finish, FinishReason::kEos) << "the prompt's plain answer must end at EOS";
  const auto budget = static_cast<int64_t>(ends.ids.size()) + 12;
  ignore_eos_ = true;
  const Generated plain = generate(prompt, budget, false);
  EXPECT_EQ(plain.finish, FinishReason::kLength);
  EXPECT_EQ(plain.stats.generated_tokens, budget);
  ASSERT_EQ(plain.ids.size(), static_cast<size_t>(budget));
  EXPECT_TRUE(std::equal(ends.ids.begin(), ends.ids.end(), plain.ids.begin()));  // EOS included
  const Generated spec = generate(prompt, budget, true),
                  forced = generate(prompt, budget, true, &plain.ids);
  for (const Generated* g : {&spec, &forced}) {
    EXPECT_EQ(g->ids, plain.ids);
    EXPECT_EQ(g->finish, FinishReason::kLength);
    EXPECT_EQ(g->state_tokens, plain.state_tokens);  // EOS entered the state like any token
  }
  EXPECT_GT(forced.stats.accepted, 0);
}

TEST_F(DsparkGenerator, BadDraftSurvivalIsRefused) {
  Generator g(*model_, *tokenizer_);
  const std::vector<TokenId> prompt{5, 6, 7};
  for (double bad : {-0.1, 1.5}) {
    SequenceState s = model_->new_sequence();
    GenerationOptions o;
    o.speculative = true;
    o.draft_min_survival = bad;
    EXPECT_THROW(g.generate(s, prompt, o, {}), InvalidRequest) << bad;
    EXPECT_EQ(s.position(), 0);  // refused before the prefill
  }
}

}  // namespace
}  // namespace flashdesk::test
