// Greedy speculative decoding with the DSpark draft head (docs/dspark.md): the head drafts a
// block after the last target token, the target verifies the token and the drafts as one step of
// rows, keeps the longest prefix it agrees with plus its own next token, and rolls back the rows
// it rejected (sequence_rollback.h). The output is token for token the plain greedy output.
//
// Non-goals here: sampling (rejection sampling keeps the distribution; a later increment), the
// confidence-driven choice of how many drafts to verify, batches of sequences.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/model/dspark_draft.h"
#include "engine/model/model.h"

namespace flashdesk {

struct SpeculativeStats {
  int64_t verifies = 0;  // verify steps
  int64_t drafted = 0;   // draft tokens the target checked
  int64_t accepted = 0;  // of them, the ones it agreed with
  // Accepted drafts per verify; each verify also yields the target's own next token.
  double mean_accepted() const {
    return verifies ? static_cast<double>(accepted) / static_cast<double>(verifies) : 0.0;
  }
};

struct SpeculativeOptions {
  int64_t draft_tokens = 0;  // drafts verified per step; 0 = the head's block size
  PrefillOptions prefill;    // mode and chunking; the loop sets target_features and on_step
  // Replaces the drafts for positions position + 1 ... before they are verified: how tests and
  // benchmarks force an acceptance rate that a random head never reaches. Empty: the head's.
  std::function<void(int64_t position, std::vector<int32_t>& drafts)> override_drafts = {};
};

// Replaces the drafts for positions position + 1 ... (see SpeculativeOptions::override_drafts).
using DraftOverride = std::function<void(int64_t position, std::vector<int32_t>& drafts)>;

// One greedy verify round, the building block of every speculative loop: the head drafts up to
// `k` tokens after `next` (the token at the state's position), the target runs [next, drafts] as
// one step, and `tokens` are the drafts it agreed with followed by its own next token. The state
// holds every row of the step until keep_rows.
struct VerifyRound {
  int64_t position = 0;         // of `next`
  int64_t drafted = 0;          // k
  int64_t accepted = 0;         // drafts agreed with
  std::vector<int32_t> tokens;  // [accepted + 1]
  SequenceStep step;            // its features seed the head in keep_rows
};
VerifyRound verify_round(Model& model, DsparkDrafter& drafter, const DraftState& draft,
                         SequenceState& state, int32_t next, int64_t k,
                         const DraftOverride& override_drafts = {});
// Keeps the round's first `m` rows (next and the first m - 1 tokens taken; 1 <= m <=
// tokens.size()), rolls back the rest and seeds the head's rings with the kept rows.
void keep_rows(Model& model, DsparkDrafter& drafter, DraftState& draft, SequenceState& state,
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
