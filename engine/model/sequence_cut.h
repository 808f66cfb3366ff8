// Cutting a sequence back to a prefix of its tokens, so a conversation whose next prompt leaves
// the live state (thinking mode drops the last answer's reasoning; an edit or a regenerate changes
// the history) keeps the KV of everything before the change. docs/engine-ops.md, "Cutting a
// sequence".
//
// Two ways back, and what each equals bit for bit (tests/engine/sequence_cut_test.cpp):
//  - exact, to a window mark (mark_window; a prefill marks the position PrefillOptions::mark_at):
//    the rings and pending compressor groups come back from the mark and the later global
//    entries are dropped: the state is the one the sequence had at that position, so continuing
//    it equals continuing the sequence from there (after an exact prefill: a fresh exact prefill
//    of the prefix followed by the same tokens);
//  - bounded, to any other position p: the complete compressed groups (entries and index keys)
//    before p are kept, pending tokens and every window row dropped. The state is then exactly a
//    restore of the prefix from its global KV rows (as after a restart, storage/kv_payload.h
//    load_prefix), and the next prefill replays the last min(W, p) tokens (PrefillOptions::replay)
//    to rebuild the window and the pending group: the result equals a restart + that replay, not a
//    fresh prefill (the replayed rows see a window that starts at the replay).
// Non-goals: choosing where to cut (the session layers compare the costs), images (the dead flags
// of the kept tokens stay as they were).
#pragma once

#include <cstdint>

#include "engine/model/sequence_state.h"
#include "engine/ops/backend.h"

namespace flashdesk {

// A copy of the state's window rings and pending compressor groups at its current position.
WindowMark window_mark(Backend& backend, const SequenceState& state);

// Keeps the state's window rings and pending compressor groups at its current position (replacing
// an older mark).
void mark_window(Backend& backend, SequenceState& state);

// Cuts `state` back to its first `position` tokens (0 <= position <= state.position()) and returns
// how many of them the next prefill must replay: 0 when the state holds a mark at exactly
// `position` (exact), else min(W, position) (bounded; W = the ring size). A mark past `position`
// is dropped.
int64_t cut_sequence(Backend& backend, SequenceState& state, int64_t position);

}  // namespace flashdesk
