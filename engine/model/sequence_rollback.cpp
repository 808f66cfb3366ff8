// Rolling back the last rows of one step (see sequence_rollback.h).
#include "engine/model/sequence_rollback.h"

#include <algorithm>
#include <string>

#include "engine/model/sequence_cut.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

std::vector<int64_t> iota(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

// Slots written by positions >= position get the row and position the mark held.
void restore_ring_slots(Backend& backend, WindowRing& ring, const WindowRing& before,
                        int64_t position) {
  std::vector<int64_t> slots;
  for (size_t slot = 0; slot < ring.positions.size(); ++slot)
    if (ring.positions[slot] >= position) {
      slots.push_back(static_cast<int64_t>(slot));
      ring.positions[slot] = before.positions[slot];
    }
  if (!slots.empty()) backend.scatter_rows(before.rows, slots, ring.rows, slots);
}

// The group holding `position` back to its tokens before `position`: those before the step from
// the mark's pending group, the step's own from its kept projections.
void rebuild_pending(Backend& backend, GlobalKv& g, const GlobalKv& before, const Tensor& kv,
                     const Tensor& score, int64_t step_first, int64_t position) {
  const int64_t m = g.ratio, group_first = position / m * m;
  g.n_entries = position / m;
  g.n_pending = position - group_first;
  const int64_t from_mark = std::max<int64_t>(0, std::min(position, step_first) - group_first);
  if (from_mark > 0) {
    const std::vector<int64_t> rows = iota(0, from_mark);
    backend.scatter_rows(before.pending_kv, rows, g.pending_kv, rows);
    backend.scatter_rows(before.pending_score, rows, g.pending_score, rows);
  }
  const int64_t first_own = std::max(group_first, step_first);
  if (position > first_own) {
    const std::vector<int64_t> src = iota(first_own - step_first, position - step_first);
    const std::vector<int64_t> dst = iota(first_own - group_first, position - group_first);
    backend.scatter_rows(kv, src, g.pending_kv, dst);
    backend.scatter_rows(score, src, g.pending_score, dst);
  }
}

}  // namespace

void begin_rollback(Backend& backend, SequenceState& state) {
  state.rollback = RollbackLog{window_mark(backend, state), {}, {}};
}

void roll_back(Backend& backend, SequenceState& state, int64_t position) {
  if (!state.rollback) throw InvalidRequest("roll_back without begin_rollback");
  const RollbackLog& log = *state.rollback;
  const int64_t first = log.before.position, end = state.position();
  if (position < first || position > end)
    throw InvalidRequest("cannot roll back to " + std::to_string(position) + ": the step covers [" +
                         std::to_string(first) + ", " + std::to_string(end) + ")");
  if (position < end) {
    const int64_t W = state.rings.empty() ? 0 : state.rings.front().rows.rows();
    FD_CHECK(end - first <= W, "a rolled-back step must not exceed the window");
    for (size_t l = 0; l < state.rings.size(); ++l)
      restore_ring_slots(backend, state.rings[l], log.before.rings[l], position);
    for (size_t l = 0; l < state.global.size(); ++l) {
      GlobalKv& g = state.global[l];
      if (g.ratio == 0) continue;
      if (g.ratio == 1) {
        g.n_entries = position;
        continue;
      }
      const bool kept = l < log.kv.size() && log.kv[l].defined();
      FD_CHECK(kept || end == first,
               "no compressor projections kept for layer " + std::to_string(l));
      if (kept)
        rebuild_pending(backend, g, log.before.global[l], log.kv[l], log.score[l], first, position);
    }
    state.tokens.resize(static_cast<size_t>(position));
    state.dead.resize(static_cast<size_t>(position));
    if (state.mark && state.mark->position > position) state.mark.reset();
  }
  state.rollback.reset();
}

}  // namespace flashdesk
