// How the next prompt of a conversation reuses the live sequence of its previous turn: extended as
// is, cut back exactly to its window mark, or cut back anywhere with a bounded replay
// (engine/model/sequence_cut.h), whichever runs the fewest tokens. ChatSession and the stored
// sessions' prefix planner (storage/prefix_planner.h) both decide here.
//
// In thinking mode a turn's prompt ends with <think> and the next rendering drops the answer's
// reasoning from there on (chat_template.h, prefix rule 4): the turn marks its window at that
// position (thinking_mark), so the next turn cuts back to it exactly and computes only the
// previous answer's visible text and the new message.
#pragma once

#include <cstdint>
#include <span>

#include "engine/model/sequence_state.h"
#include "engine/ops/backend.h"
#include "engine/tokenizer/chat_template.h"

namespace flashdesk {

struct LiveReuse {
  enum class Kind { none, extend, cut_to_mark, cut_bounded };
  Kind kind = Kind::none;
  int64_t keep = 0;    // prompt tokens whose KV stays
  int64_t replay = 0;  // of them, run again to rebuild the window (cut_bounded: min(W, keep))
  int64_t cost = 0;    // tokens the prefill runs: prompt - keep + replay
};

// The cheapest reuse of `live` for a prompt of `prompt_tokens` tokens that shares its first
// `common` tokens with the live state (as far as its KV may serve them: image_safe_prefix). The
// last prompt token is always computed (for the logits). Kind::none (cost = prompt_tokens) when
// nothing beats a fresh prefill.
LiveReuse plan_live_reuse(const SequenceState& live, int64_t prompt_tokens, int64_t common);

// Applies a plan to `live` (cut_sequence) and returns the replay the prefill must run.
int64_t apply_live_reuse(Backend& backend, SequenceState& live, const LiveReuse& reuse);

// The position at which a turn marks its window: the prompt's last token (<think>) in thinking
// mode, which the next rendering replaces; -1 in chat mode, whose prompt and answer the next
// rendering extends.
int64_t thinking_mark(ThinkingMode mode, int64_t prompt_tokens);

}  // namespace flashdesk
