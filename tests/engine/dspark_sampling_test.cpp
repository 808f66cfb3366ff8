// Speculative sampling keeps the sampling distribution (engine/runtime/generator.h with
// `speculative` and temperature > 0): on flash-tiny with a random DSpark head, the first tokens of
// many seeded answers with speculative decoding on have the same distribution as with it off.
// Two arms on: the head's own sampled drafts (few accepted: the head is random), and drafts forced
// to the greedy answer (point-mass proposals, most accepted, so the bonus draw after a fully
// accepted block is exercised too).
//
// The test per generated position j >= 1 (position 0 is drawn from the prefill logits by the
// plain sampler in both modes) is Pearson's chi-square test of homogeneity of two samples of
// equal size n: X = sum_c (a_c - b_c)^2 / (a_c + b_c) over the tokens c seen at least 10 times in
// both arms together (the rest pooled), with C - 1 degrees of freedom, against the 1 - 1e-3
// quantile (Wilson-Hilferty). The arms use disjoint seeds, so a correct implementation fails one
// comparison with probability about 1e-3 and this test (6 comparisons) below 6e-3; the seeds are
// fixed, so the runs are reproducible. (At 1e-4, 200 answers missed a residual drawn from p
// instead of p - q; at 1e-3, 300 answers catch it, docs/dspark.md.)
//
// The forced arm can show a wrong rejection only where the forced path is neither sure nor
// hopeless, which depends on the model: a prompt that did it for one training of flash-tiny ("Once
// upon a time, a cat") had its greedy path accepted 2% of the time after the next (and a residual
// broken on purpose went unnoticed). So the prompt is chosen from a list by that property of the
// model at hand (forced_signal below), before any answer is drawn; the choice uses no seed.
//
// To keep the test short every answer reuses one prefill: the prompt but its last token is
// prefilled once and marked, each answer prefills the last token and generates, and the state is
// cut back to the mark (exact: the same state every time, in both arms).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "engine/model/sequence_cut.h"
#include "engine/runtime/backend_factory.h"
#include "engine/runtime/generator.h"
#include "tests/engine/dspark_test_util.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

constexpr int64_t kTokens = 4;  // generated per answer: rounds of 2 and 1 drafts after the first
constexpr int64_t kAnswers = 300;
constexpr float kTemperature = 0.8f, kTopP = 0.95f;

// Prose openings (the demo model saw Debian's English texts) that forced_signal chooses from.
constexpr const char* kPrompts[] = {"Once upon a time, a cat",
                                    "In the beginning God created",
                                    "The quick brown fox",
                                    "The sun rose over the",
                                    "I like to eat",
                                    "The little dog ran",
                                    "It was a dark and stormy night",
                                    "The old man walked to the",
                                    "There was once a little girl"};
constexpr int64_t kFirstRoundDrafts = 2;
// Below this the forced arm hardly tests the rejection branch. Measured with the residual drawn
// from p on purpose, on the flash-tiny of 1644 steps and on a later training (1827 steps): the
// prompts of this list under which it went unnoticed had 0.02 and 0.17, those that caught it
// 0.16-0.31 (the chosen one, "The quick brown fox", 0.31 and 0.26). On the 2324-step model the
// first six reach at most 0.18; the last three were added then (0.31, 0.28 and 0.21).
constexpr double kMinSignal = 0.2;

// The 1 - alpha quantile of chi-square with df degrees of freedom (Wilson-Hilferty), for the
// normal quantile z of 1 - alpha.
double chi_square_quantile(int64_t df, double z) {
  const double d = static_cast<double>(df), a = 2.0 / (9.0 * d);
  return d * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

struct Arm {
  std::vector<std::vector<TokenId>> answers;  // [kAnswers][<= kTokens], EOS ends one early
  GenerationStats totals;
};

class DsparkSampling : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = make_backend("cpu", 2).release();
    model_ = new Model(Checkpoint::open(flash_tiny_with_random_head_dir()), *backend_);
    tokenizer_ =
        new Tokenizer(Tokenizer::from_file(flash_tiny_with_random_head_dir() / "tokenizer.json"));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
    delete backend_;
  }

  GenerationOptions options(bool speculative, uint64_t seed) {
    GenerationOptions o;
    o.max_new_tokens = kTokens;
    o.speculative = speculative;
    o.sampling = {.temperature = kTemperature, .top_p = kTopP, .seed = seed};
    o.draft_min_survival = 0.0;  // every round verifies what the budget allows: 2, then 1
    return o;
  }

  // How much a rejected forced draft replaced from p instead of max(0, p - q) would move the
  // arm's tokens: the draft x_j (the greedy token) is accepted with probability p_j, and from p
  // it comes back after a rejection with p_j (1 - p_j) more; that shows at position j as far as
  // the forced path up to it was taken (p_0 ... p_{j-1}; p_0 is the plain sampler's first token).
  // Summed over the first round's drafts, positions 1 and 2, along the greedy path: position 3 is
  // drafted only after a rejection, off that path, and is otherwise the bonus draw.
  static double forced_signal(const std::vector<TokenId>& prompt) {
    SequenceState s = model_->new_sequence();
    Sampler sampler(SamplingParams{.temperature = kTemperature, .top_p = kTopP});
    std::vector<float> logits = model_->prefill(s, prompt, PrefillOptions{});
    double taken = 1.0, signal = 0.0;
    for (int64_t j = 0; j <= kFirstRoundDrafts; ++j) {
      const int64_t x = argmax(logits);
      const double p = sampler.distribution(logits)[static_cast<size_t>(x)];
      if (j > 0) signal += taken * p * (1.0 - p);
      taken *= p;
      if (j < kFirstRoundDrafts) logits = model_->decode(s, static_cast<TokenId>(x));
    }
    return signal;
  }

  // Prefills all of `prompt` but its last token, marked, into state_.
  void prepare(const std::vector<TokenId>& prompt) {
    state_ = std::make_unique<SequenceState>(model_->new_sequence());
    model_->prefill(*state_, std::span(prompt).first(prompt.size() - 1), PrefillOptions{});
    mark_window(*backend_, *state_);
  }

  // Generates after state_ and the prompt's last token, then cuts state_ back.
  std::vector<TokenId> generate(const std::vector<TokenId>& prompt, const GenerationOptions& o,
                                GenerationStats* totals = nullptr) {
    Generator g(*model_, *tokenizer_);
    std::vector<TokenId> ids;
    StreamCallbacks cb;
    cb.on_token = [&](TokenId id) { ids.push_back(id); };
    const auto prefix = static_cast<int64_t>(prompt.size()) - 1;
    const GenerationResult r = g.generate(*state_, std::span(prompt).last(1), o, cb);
    EXPECT_EQ(cut_sequence(*backend_, *state_, prefix), 0);  // exact, back to the mark
    if (totals) {
      totals->draft_rounds += r.stats.draft_rounds;
      totals->verifies += r.stats.verifies;
      totals->drafted += r.stats.drafted;
      totals->accepted += r.stats.accepted;
    }
    return ids;
  }

  // forced: drafts are the greedy answer's next tokens.
  Arm run(const std::vector<TokenId>& prompt, bool speculative, uint64_t first_seed,
          const std::vector<TokenId>* forced = nullptr) {
    Arm arm;
    for (int64_t i = 0; i < kAnswers; ++i) {
      GenerationOptions o = options(speculative, first_seed + static_cast<uint64_t>(i));
      if (forced)
        o.override_drafts = [&](int64_t position, std::vector<int32_t>& drafts) {
          for (size_t j = 0; j < drafts.size(); ++j) {
            const auto at = static_cast<size_t>(position + 1) - prompt.size() + j;
            drafts[j] = at < forced->size() ? (*forced)[at] : (*forced).back();
          }
        };
      arm.answers.push_back(generate(prompt, o, &arm.totals));
    }
    return arm;
  }

  // Chi-square homogeneity of the two arms' tokens at position j (-1: the answer ended before).
  // Returns whether the position tested anything: where every answer of both arms has the same
  // token there (one cell), the two agree and there is no distribution to compare.
  bool expect_same_distribution(const Arm& a, const Arm& b, size_t j, const std::string& what) {
    std::map<TokenId, std::pair<int64_t, int64_t>> counts;
    for (const auto& ids : a.answers) ++counts[j < ids.size() ? ids[j] : -1].first;
    for (const auto& ids : b.answers) ++counts[j < ids.size() ? ids[j] : -1].second;
    std::vector<std::pair<int64_t, int64_t>> cells;
    std::pair<int64_t, int64_t> pooled{0, 0};
    for (const auto& [token, c] : counts) {
      if (c.first + c.second >= 10) {
        cells.push_back(c);
      } else {
        pooled.first += c.first;
        pooled.second += c.second;
      }
    }
    if (pooled.first + pooled.second > 0) cells.push_back(pooled);
    double x = 0.0;
    for (const auto& [ca, cb] : cells)
      x += static_cast<double>((ca - cb) * (ca - cb)) / static_cast<double>(ca + cb);
    const int64_t df = static_cast<int64_t>(cells.size()) - 1;
    if (df < 1) {
      std::cout << "[ dspark sampling ] " << what << " position " << j
                << ": one token in every answer of both arms\n";
      return false;
    }
    const double limit = chi_square_quantile(df, 3.090);  // alpha = 1e-3
    EXPECT_LT(x, limit) << what << " position " << j << ": chi-square " << x << " with " << df
                        << " degrees of freedom";
    std::cout << "[ dspark sampling ] " << what << " position " << j << ": chi-square " << x
              << ", df " << df << ", limit " << limit << "\n";
    return true;
  }

  static Backend* backend_;
  static Model* model_;
  static Tokenizer* tokenizer_;
  std::unique_ptr<SequenceState> state_;
};
Backend* DsparkSampling::backend_ = nullptr;
Model* DsparkSampling::model_ = nullptr;
Tokenizer* DsparkSampling::tokenizer_ = nullptr;

TEST_F(DsparkSampling, FirstTokensKeepTheirDistribution) {
  std::string chosen;
  double best = -1.0;
  for (const char* text : kPrompts) {
    const double signal = forced_signal(tokenizer_->encode(text));
    std::cout << "[ dspark sampling ] \"" << text << "\": forced signal " << signal << "\n";
    if (signal > best) {
      best = signal;
      chosen = text;
    }
  }
  ASSERT_GT(best, kMinSignal) << "no prompt of the list tests the rejection branch on this model";
  std::cout << "[ dspark sampling ] prompt \"" << chosen << "\"\n";
  const std::vector<TokenId> prompt = tokenizer_->encode(chosen);
  prepare(prompt);
  GenerationOptions greedy = options(false, 0);
  greedy.sampling.temperature = 0.0f;
  greedy.max_new_tokens = kTokens + 8;
  const std::vector<TokenId> forced = generate(prompt, greedy);

  const Arm plain = run(prompt, false, 1);
  const Arm own = run(prompt, true, 1 + kAnswers);
  const Arm pushed = run(prompt, true, 1 + 2 * kAnswers, &forced);
  EXPECT_GT(own.totals.verifies, 0);
  // Forced drafts are accepted often: the accept branch and the bonus draw are both exercised.
  EXPECT_GT(pushed.totals.accepted, kAnswers / 4);
  std::cout << "[ dspark sampling ] own drafts: " << own.totals.accepted << "/"
            << own.totals.drafted << " accepted; forced: " << pushed.totals.accepted << "/"
            << pushed.totals.drafted << "\n";
  int64_t tested_own = 0, tested_forced = 0;
  for (size_t j = 1; j < static_cast<size_t>(kTokens); ++j) {
    tested_own += expect_same_distribution(plain, own, j, "own drafts");
    tested_forced += expect_same_distribution(plain, pushed, j, "forced drafts");
  }
  // Two of the first positions at least must vary, or the prompt tests nothing.
  EXPECT_GE(tested_own, 2);
  EXPECT_GE(tested_forced, 2);
}

TEST_F(DsparkSampling, SameSeedSameAnswer) {
  const std::vector<TokenId> prompt = tokenizer_->encode("Once upon a time, a cat");
  prepare(prompt);
  GenerationOptions o = options(true, 77);
  o.max_new_tokens = 24;
  EXPECT_EQ(generate(prompt, o), generate(prompt, o));
}

}  // namespace
}  // namespace flashdesk::test
