// Speculative decoding with the DSpark draft head (docs/dspark.md): the head drafts a block after
// the last target token, the confidence head's survival decides how many drafts to verify, the
// target verifies the token and those drafts as one step of rows, keeps the longest prefix it
// agrees with (greedy) or accepts by rejection sampling (DraftSampling), adds its own next token,
// and rolls back the rows it rejected (sequence_rollback.h). Greedy output is token for token the
// plain greedy output; sampled output keeps the plain sampling distribution.
//
// Non-goals here: batches of sequences, a per-position confidence temperature (calibration).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/model/dspark_draft.h"
#include "engine/model/model.h"

namespace flashdesk {

// The default of SpeculativeOptions::min_survival (docs/dspark.md "Draft length"): a verify row
// costs a small part of a weight-bound step, so a draft is worth checking while the confidence
// head gives it at least a 1 in 10 chance of being reached and accepted.
inline constexpr double kDefaultDraftMinSurvival = 0.1;

struct SpeculativeStats {
  int64_t rounds = 0;    // target steps after a draft (drafts chosen: 0 ... most)
  int64_t verifies = 0;  // of them, the ones that checked at least one draft
  int64_t drafted = 0;   // draft tokens the target checked
  int64_t accepted = 0;  // of them, the ones it agreed with
  // Host wall time of the rounds' phases: drafting (the head and reading its block back), the
  // target's verify step (and reading its logits back), keeping rows (rollback and seeding, which
  // only queue work on a GPU backend: their device time shows up in the next phase).
  double draft_ms = 0.0, verify_ms = 0.0, keep_ms = 0.0;
  // Accepted drafts per verify; each verify also yields the target's own next token.
  double mean_accepted() const {
    return verifies ? static_cast<double>(accepted) / static_cast<double>(verifies) : 0.0;
  }
  // The chosen draft lengths' mean over all rounds (0 when the confidence chose none).
  double mean_drafted() const {
    return rounds ? static_cast<double>(drafted) / static_cast<double>(rounds) : 0.0;
  }
};

struct SpeculativeOptions {
  int64_t draft_tokens = 0;  // most drafts verified per step; 0 = the head's block size
  // Verify the longest prefix of drafts whose survival (the product of the confidence head's
  // sigmoids: the chance that all of them are accepted) is at least this; 0 = always the most.
  double min_survival = kDefaultDraftMinSurvival;
  PrefillOptions prefill;  // mode and chunking; the loop sets target_features and on_step
  // Replaces the drafts for positions position + 1 ... before they are verified: how tests and
  // benchmarks force an acceptance rate that a random head never reaches. Empty: the head's.
  std::function<void(int64_t position, std::vector<int32_t>& drafts)> override_drafts = {};
};

// Replaces the drafts for positions position + 1 ... (see SpeculativeOptions::override_drafts).
using DraftOverride = std::function<void(int64_t position, std::vector<int32_t>& drafts)>;

// How a verify round chooses tokens when sampling (temperature > 0): the speculative-sampling
// rule, which keeps the target's sampling distribution (engine/runtime/speculative_sampling.h).
// A round without one is greedy.
class DraftSampling {
 public:
  virtual ~DraftSampling() = default;
  // Draws the draft of block row `row` (rows come in order, 0 first, each conditioned by the
  // Markov head on the draw before it) from that row's corrected logits; its distribution q is
  // kept for accept().
  virtual int32_t draw_draft(int64_t row, std::span<const float> logits) = 0;
  // The round's tokens: the drafts accepted by rejection sampling against the target's rows
  // `target_logits` [drafts.size() + 1, vocab], then one more token (from the residual of the
  // first rejected row, or from the last row when all were accepted). forced: the drafts were
  // replaced (override_drafts); each is then its own point-mass proposal.
  virtual std::vector<int32_t> accept(std::span<const int32_t> drafts,
                                      std::span<const float> target_logits, int64_t vocab,
                                      bool forced) = 0;
};

// How many of the head's drafts to verify: the longest prefix of at most `most` whose survival
// prod_{i<j} sigmoid(confidence[i]) is at least `min_survival` (MODEL-REFERENCE §10.2); all
// `most` when min_survival <= 0.
int64_t confident_drafts(std::span<const float> confidence, int64_t most, double min_survival);

struct RoundOptions {
  double min_survival = kDefaultDraftMinSurvival;  // see SpeculativeOptions
  DraftOverride override_drafts = {};
  DraftSampling* sampling = nullptr;  // null: greedy
};

// One verify round, the building block of every speculative loop: the head drafts after `next`
// (the token at the state's position), the confidence chooses k <= `most` drafts, the target
// runs [next, drafts] as one step, and `tokens` are the drafts it accepted followed by its own
// next token. With most = 0 nothing is drafted (a plain step). The state holds every row of the
// step until keep_rows.
struct VerifyRound {
  int64_t position = 0;                    // of `next`
  bool drafted_block = false;              // the head ran (most > 0)
  int64_t drafted = 0;                     // k
  int64_t accepted = 0;                    // drafts accepted
  std::vector<int32_t> tokens;             // [accepted + 1]
  double draft_ms = 0.0, verify_ms = 0.0;  // host wall time of the two phases
  SequenceStep step;                       // its features seed the head in keep_rows
};
VerifyRound verify_round(Model& model, DsparkDrafter& drafter, const DraftState& draft,
                         SequenceState& state, int32_t next, int64_t most,
                         const RoundOptions& options = {});
// Adds a round's counts to `stats`.
void count_round(const VerifyRound& round, SpeculativeStats& stats);
// Keeps the round's first `m` rows (next and the first m - 1 tokens taken; 1 <= m <=
// tokens.size()), rolls back the rest and seeds the head's rings with the kept rows. Returns its
// host wall time in ms.
double keep_rows(Model& model, DsparkDrafter& drafter, DraftState& draft, SequenceState& state,
                 const VerifyRound& round, int64_t m);
// Most drafts a round may verify: the block size, `wanted` (> 0) and W - 1 (rollback limit).
int64_t most_drafts(const Model& model, const DsparkDrafter& drafter, int64_t wanted = 0);

// Prefills `prompt` into the fresh `state` and returns the next `n` greedy tokens.
std::vector<int32_t> greedy_speculative(Model& model, DsparkDrafter& drafter, SequenceState& state,
                                        std::span<const int32_t> prompt, int64_t n,
                                        const SpeculativeOptions& options,
                                        SpeculativeStats* stats = nullptr);

// The same without a draft head: one decode step per token (the reference the tests compare with).
std::vector<int32_t> greedy_plain(Model& model, SequenceState& state,
                                  std::span<const int32_t> prompt, int64_t n,
                                  const PrefillOptions& prefill = {});

}  // namespace flashdesk
