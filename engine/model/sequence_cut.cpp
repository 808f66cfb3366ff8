// Window marks and cutting a sequence back to a prefix (see sequence_cut.h).
#include "engine/model/sequence_cut.h"

#include <algorithm>
#include <string>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

Tensor copy_of(Backend& backend, const Tensor& t) {
  Tensor out = backend.alloc(t.dtype(), t.shape());
  backend.copy(t, out);
  return out;
}

// The state at the mark's position: its rings and pending groups back, later entries dropped.
void restore_mark(Backend& backend, SequenceState& state, const WindowMark& mark) {
  for (size_t l = 0; l < state.rings.size(); ++l) {
    backend.copy(mark.rings[l].rows, state.rings[l].rows);
    state.rings[l].positions = mark.rings[l].positions;
  }
  for (size_t l = 0; l < state.global.size(); ++l) {
    GlobalKv& g = state.global[l];
    const GlobalKv& m = mark.global[l];
    if (g.ratio == 0) continue;
    FD_CHECK(m.n_entries <= g.n_entries, "a window mark holds more entries than its state");
    g.n_entries = m.n_entries;
    g.n_pending = m.n_pending;
    if (g.pending_kv.defined()) {
      backend.copy(m.pending_kv, g.pending_kv);
      backend.copy(m.pending_score, g.pending_score);
    }
  }
}

// Keeps the complete groups before `position`; the pending group and every window row go.
void drop_window(SequenceState& state, int64_t position) {
  for (WindowRing& ring : state.rings) std::fill(ring.positions.begin(), ring.positions.end(), -1);
  for (GlobalKv& g : state.global) {
    if (g.ratio == 0) continue;
    g.n_entries = std::min(g.n_entries, position / g.ratio);
    g.n_pending = 0;
  }
}

}  // namespace

WindowMark window_mark(Backend& backend, const SequenceState& state) {
  WindowMark mark;
  mark.position = state.position();
  for (const WindowRing& ring : state.rings)
    mark.rings.push_back(WindowRing{copy_of(backend, ring.rows), ring.positions});
  for (const GlobalKv& g : state.global) {
    GlobalKv m;
    m.ratio = g.ratio;
    m.n_entries = g.n_entries;
    m.n_pending = g.n_pending;
    if (g.pending_kv.defined()) {
      m.pending_kv = copy_of(backend, g.pending_kv);
      m.pending_score = copy_of(backend, g.pending_score);
    }
    mark.global.push_back(std::move(m));
  }
  return mark;
}

void mark_window(Backend& backend, SequenceState& state) {
  state.mark = window_mark(backend, state);
}

int64_t cut_sequence(Backend& backend, SequenceState& state, int64_t position) {
  if (position < 0 || position > state.position())
    throw InvalidRequest("cannot cut a sequence of " + std::to_string(state.position()) +
                         " tokens back to " + std::to_string(position));
  if (state.mark && state.mark->position > position) state.mark.reset();
  int64_t replay = 0;
  if (position == state.position()) return 0;  // nothing to cut
  if (state.mark && state.mark->position == position) {
    restore_mark(backend, state, *state.mark);
  } else {
    drop_window(state, position);
    const int64_t W = state.rings.empty() ? 0 : state.rings.front().rows.rows();
    replay = std::min(W, position);
  }
  state.tokens.resize(static_cast<size_t>(position));
  state.dead.resize(static_cast<size_t>(position));
  return replay;
}

}  // namespace flashdesk
