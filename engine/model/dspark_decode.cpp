// Greedy speculative decoding (see dspark_decode.h).
#include "engine/model/dspark_decode.h"

#include <algorithm>

#include "engine/model/sequence_rollback.h"

namespace flashdesk {
namespace {

int32_t argmax_row(const std::vector<float>& logits, int64_t row, int64_t V) {
  const float* r = logits.data() + row * V;
  return static_cast<int32_t>(std::max_element(r, r + V) - r);  // first maximum, as torch
}

// One target step over `ids` with every row's logits and the target features.
SequenceStep run_rows(Model& model, SequenceState& state, std::span<const int32_t> ids) {
  SequenceStep s;
  s.state = &state;
  s.tokens = ids;
  s.logits = LogitsWanted::All;
  s.want_features = true;
  s.rows_as_decode = true;
  model.step(std::span<SequenceStep>(&s, 1));
  return s;
}

}  // namespace

std::vector<int32_t> greedy_speculative(Model& model, DsparkDrafter& drafter, SequenceState& state,
                                        std::span<const int32_t> prompt, int64_t n,
                                        const SpeculativeOptions& options,
                                        SpeculativeStats* stats) {
  const TextConfig& t = model.config().text;
  const int64_t V = t.vocab_size;
  DraftState draft = drafter.new_state();
  PrefillOptions po = options.prefill;
  po.target_features = true;
  po.on_step = [&](const SequenceStep& s) {
    if (s.out_features.defined()) drafter.seed(draft, s.out_features, s.features_first_position);
  };
  std::vector<int32_t> out;
  if (n <= 0) return out;
  const std::vector<float> last = model.prefill(state, prompt, po);
  int32_t next = argmax_row(last, 0, V);
  out.push_back(next);
  // A verify step is rolled back within the window: at most W rows.
  const int64_t most =
      std::min<int64_t>(options.draft_tokens > 0 ? options.draft_tokens : drafter.block_size(),
                        std::min(drafter.block_size(), t.sliding_window - 1));
  SpeculativeStats local;
  while (static_cast<int64_t>(out.size()) < n) {
    const int64_t P = state.position();
    const int64_t room = model.max_context() - P - 1;
    const int64_t k = std::clamp<int64_t>(std::min(most, n - static_cast<int64_t>(out.size()) - 1),
                                          0, std::max<int64_t>(room, 0));
    std::vector<int32_t> rows{next};
    if (k > 0) {
      const DraftBlock block = drafter.draft(draft, next);
      std::vector<int32_t> drafts(block.tokens.begin(), block.tokens.begin() + k);
      if (options.override_drafts) options.override_drafts(P, drafts);
      FD_CHECK(static_cast<int64_t>(drafts.size()) == k, "override_drafts changed the count");
      rows.insert(rows.end(), drafts.begin(), drafts.end());
    }
    begin_rollback(model.backend(), state);
    const SequenceStep s = run_rows(model, state, rows);
    int64_t a = 0;
    while (a < k && rows[static_cast<size_t>(a + 1)] == argmax_row(s.out_logits, a, V)) ++a;
    next = argmax_row(s.out_logits, a, V);
    roll_back(model.backend(), state, P + a + 1);
    drafter.seed(draft, s.out_features.rows(0, a + 1), P);
    out.insert(out.end(), rows.begin() + 1, rows.begin() + 1 + a);
    out.push_back(next);
    if (k > 0) {
      ++local.verifies;
      local.drafted += k;
      local.accepted += a;
    }
  }
  out.resize(static_cast<size_t>(n));
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
