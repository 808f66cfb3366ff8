// Rolling back the last rows of one step, exactly: what speculative decoding needs after a verify
// step whose last rows the target rejected (docs/dspark.md).
//
// begin_rollback before the step keeps the window rings and pending compressor groups (a window
// mark) and makes the step keep its compressor projections; roll_back(position) then gives the
// state it would have had after running only the rows before `position`: the ring slots those
// rows overwrote come back from the mark, the global entries of groups that end past `position`
// are dropped and the pending group is rebuilt from the mark and the kept projections. Continuing
// from there equals never having run the rejected rows, bit for bit
// (tests/engine/sequence_rollback_test.cpp). Engram reads only the token history, which is cut.
//
// Limits: one step between begin and roll_back/commit, no replay in it, at most sliding_window
// rows (a row older than the window would have to come back into the ring).
#pragma once

#include <cstdint>

#include "engine/model/sequence_state.h"
#include "engine/ops/backend.h"

namespace flashdesk {

// Takes the mark at the state's current position; the next step keeps what a rollback needs.
void begin_rollback(Backend& backend, SequenceState& state);

// Keeps the first `position` tokens (mark position <= position <= state.position()) and ends the
// rollback log. A window mark (sequence_cut.h) past `position` is dropped.
void roll_back(Backend& backend, SequenceState& state, int64_t position);

// Keeps everything the step wrote and ends the rollback log.
inline void commit_rollback(SequenceState& state) {
  state.rollback.reset();
}

}  // namespace flashdesk
