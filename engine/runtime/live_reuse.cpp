// Choosing how a prompt reuses the live sequence (see live_reuse.h).
#include "engine/runtime/live_reuse.h"

#include <algorithm>

#include "engine/model/sequence_cut.h"
#include "engine/util/error.h"

namespace flashdesk {

LiveReuse plan_live_reuse(const SequenceState& live, int64_t prompt_tokens, int64_t common) {
  const int64_t P = prompt_tokens, usable = std::min(common, P - 1);
  const int64_t W = live.rings.empty() ? 0 : live.rings.front().rows.rows();
  LiveReuse best{.kind = LiveReuse::Kind::none, .keep = 0, .replay = 0, .cost = P};
  const auto consider = [&](LiveReuse c) {
    if (c.cost < best.cost) best = c;
  };
  if (common == live.position() && common < P)
    consider({LiveReuse::Kind::extend, common, 0, P - common});
  if (live.mark && live.mark->position <= usable)
    consider({LiveReuse::Kind::cut_to_mark, live.mark->position, 0, P - live.mark->position});
  if (usable > 0 && usable < live.position()) {
    const int64_t replay = std::min(W, usable);
    consider({LiveReuse::Kind::cut_bounded, usable, replay, P - usable + replay});
  }
  return best;
}

int64_t apply_live_reuse(Backend& backend, SequenceState& live, const LiveReuse& reuse) {
  const int64_t replay = cut_sequence(backend, live, reuse.keep);
  FD_CHECK(replay == reuse.replay, "a live-KV cut replays other than planned");
  return replay;
}

int64_t thinking_mark(ThinkingMode mode, int64_t prompt_tokens) {
  return mode == ThinkingMode::kThinking && prompt_tokens > 0 ? prompt_tokens - 1 : -1;
}

}  // namespace flashdesk
