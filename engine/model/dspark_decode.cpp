// Speculative decoding rounds and the greedy loop (see dspark_decode.h).
#include "engine/model/dspark_decode.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/model/sequence_rollback.h"

namespace flashdesk {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int32_t argmax_row(const std::vector<float>& logits, int64_t row, int64_t V) {
  const float* r = logits.data() + row * V;
  return static_cast<int32_t>(std::max_element(r, r + V) - r);  // first maximum, as torch
}

}  // namespace

int64_t confident_drafts(std::span<const float> confidence, int64_t most, double min_survival) {
  if (min_survival <= 0.0) return most;
  double survival = 1.0;
  int64_t k = 0;
  for (; k < most && k < static_cast<int64_t>(confidence.size()); ++k) {
    survival /= 1.0 + std::exp(-static_cast<double>(confidence[static_cast<size_t>(k)]));
    if (survival < min_survival) break;
  }
  return k;
}

VerifyRound verify_round(Model& model, DsparkDrafter& drafter, const DraftState& draft,
                         SequenceState& state, int32_t next, int64_t most,
                         const RoundOptions& options) {
  const int64_t V = model.config().text.vocab_size;
  VerifyRound r;
  r.position = state.position();
  Clock::time_point phase = Clock::now();
  std::vector<int32_t> rows{next};
  if (most > 0) {
    DraftPicker pick;
    if (options.sampling)
      pick = [&](int64_t row, std::span<const float> logits) {
        return options.sampling->draw_draft(row, logits);
      };
    // Greedy, only the tokens and confidences come back: the draft's one read-back stays small.
    const DraftBlock block = drafter.draft(draft, next, pick, DraftLogits::Dropped);
    r.drafted_block = true;
    r.drafted = confident_drafts(block.confidence, most, options.min_survival);
    std::vector<int32_t> drafts(block.tokens.begin(), block.tokens.begin() + r.drafted);
    if (options.override_drafts && r.drafted > 0) options.override_drafts(r.position, drafts);
    if (static_cast<int64_t>(drafts.size()) != r.drafted)
      throw InvalidRequest("override_drafts changed the number of drafts");
    rows.insert(rows.end(), drafts.begin(), drafts.end());
    r.draft_ms = ms_since(phase);
    phase = Clock::now();
  }
  begin_rollback(model.backend(), state);
  r.step.state = &state;
  r.step.tokens = rows;
  r.step.logits = LogitsWanted::All;
  r.step.want_features = true;
  r.step.rows_as_decode = true;
  try {
    model.step(std::span<SequenceStep>(&r.step, 1));
  } catch (...) {
    commit_rollback(state);  // a refused step changed nothing; later steps keep no log
    throw;
  }
  r.step.tokens = {};  // `rows` ends here
  r.verify_ms = ms_since(phase);
  const std::span<const int32_t> drafts(rows.data() + 1, static_cast<size_t>(r.drafted));
  if (options.sampling) {
    r.tokens = options.sampling->accept(drafts, r.step.out_logits, V,
                                        static_cast<bool>(options.override_drafts));
    r.accepted = static_cast<int64_t>(r.tokens.size()) - 1;
    return r;
  }
  while (r.accepted < r.drafted &&
         drafts[static_cast<size_t>(r.accepted)] == argmax_row(r.step.out_logits, r.accepted, V))
    ++r.accepted;
  r.tokens.assign(drafts.begin(), drafts.begin() + r.accepted);
  r.tokens.push_back(argmax_row(r.step.out_logits, r.accepted, V));
  return r;
}

void count_round(const VerifyRound& round, SpeculativeStats& stats) {
  stats.draft_ms += round.draft_ms;
  stats.verify_ms += round.verify_ms;
  if (!round.drafted_block) return;
  ++stats.rounds;
  if (round.drafted == 0) return;
  ++stats.verifies;
  stats.drafted += round.drafted;
  stats.accepted += round.accepted;
}

double keep_rows(Model& model, DsparkDrafter& drafter, DraftState& draft, SequenceState& state,
                 const VerifyRound& round, int64_t m) {
  FD_CHECK(m >= 1 && m <= static_cast<int64_t>(round.tokens.size()), "keep_rows: bad row count");
  const Clock::time_point start = Clock::now();
  roll_back(model.backend(), state, round.position + m);
  drafter.seed(draft, round.step.out_features.rows(0, m), round.position);
  return ms_since(start);
}

int64_t most_drafts(const Model& model, const DsparkDrafter& drafter, int64_t wanted) {
  const int64_t most = std::min(drafter.block_size(), model.config().text.sliding_window - 1);
  return wanted > 0 ? std::min(wanted, most) : most;
}

std::vector<int32_t> greedy_speculative(Model& model, DsparkDrafter& drafter, SequenceState& state,
                                        std::span<const int32_t> prompt, int64_t n,
                                        const SpeculativeOptions& options,
                                        SpeculativeStats* stats) {
  DraftState draft = drafter.new_state();
  PrefillOptions po = options.prefill;
  po.target_features = true;
  po.on_step = [&](const SequenceStep& s) {
    if (s.out_features.defined()) drafter.seed(draft, s.out_features, s.features_first_position);
  };
  std::vector<int32_t> out;
  if (n <= 0) return out;
  const std::vector<float> last = model.prefill(state, prompt, po);
  out.push_back(argmax_row(last, 0, model.config().text.vocab_size));
  const int64_t most = most_drafts(model, drafter, options.draft_tokens);
  SpeculativeStats local;
  while (static_cast<int64_t>(out.size()) < n) {
    const int64_t room = std::max<int64_t>(0, model.max_context() - state.position() - 1);
    const int64_t k =
        std::clamp<int64_t>(std::min(most, n - static_cast<int64_t>(out.size()) - 1), 0, room);
    const VerifyRound r = verify_round(model, drafter, draft, state, out.back(), k,
                                       {options.min_survival, options.override_drafts});
    local.keep_ms +=
        keep_rows(model, drafter, draft, state, r, static_cast<int64_t>(r.tokens.size()));
    out.insert(out.end(), r.tokens.begin(), r.tokens.end());
    count_round(r, local);
  }
  if (stats) *stats = local;
  return out;
}

std::vector<int32_t> greedy_plain(Model& model, SequenceState& state,
                                  std::span<const int32_t> prompt, int64_t n,
                                  const PrefillOptions& prefill) {
  const int64_t V = model.config().text.vocab_size;
  std::vector<int32_t> out;
  if (n <= 0) return out;
  std::vector<float> logits = model.prefill(state, prompt, prefill);
  out.push_back(argmax_row(logits, 0, V));
  while (static_cast<int64_t>(out.size()) < n) {
    logits = model.decode(state, out.back());
    out.push_back(argmax_row(logits, 0, V));
  }
  return out;
}

}  // namespace flashdesk
