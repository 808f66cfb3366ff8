// Choosing and loading the cached prefix of a prompt: live KV, SSD blocks, window pool.
#include "storage/prefix_planner.h"

#include <algorithm>
#include <chrono>

#include "engine/runtime/chat_engine.h"
#include "engine/runtime/live_reuse.h"
#include "storage/kv_payload.h"
#include "storage/window_snapshot.h"

namespace flashdesk::storage {
namespace {

using SteadyClock = std::chrono::steady_clock;

double ms_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

// A way to get the prefix [0, tokens) into a state; `cost` = tokens the prefill must run.
struct Candidate {
  enum class Kind { none, live, ssd, pool } kind = Kind::none;
  int64_t tokens = 0;
  int64_t cost = 0;
  int64_t pool_base = 0;  // pool: the global KV below this comes from SSD blocks (or live rows)
};

int64_t floor_to(int64_t n, int64_t step) {
  return step > 0 ? n / step * step : 0;
}

// The SSD blocks' rows of [0, covered), read and verified; stops at the first block that is not a
// hit (the store deleted a corrupt one). Returns the tokens actually loaded.
int64_t read_ssd_rows(const PrefixSources& src, const PrefixMatch& match, int64_t covered,
                      const SequenceState& shape, std::vector<GlobalKvRows>& rows,
                      PlannedPrefill& out) {
  const int64_t B = src.blocks->tokens_per_block();
  const auto keys =
      std::span<const BlockKey>(match.covered_keys).first(static_cast<size_t>(covered / B));
  const auto t0 = SteadyClock::now();
  std::optional<int64_t> session;
  if (src.session_id > 0 && src.link_blocks) session = src.session_id;
  const std::vector<BlockRead> reads = src.blocks->get(keys, session);
  out.read_ms += ms_since(t0);
  rows.assign(shape.global.size(), GlobalKvRows{});
  int64_t loaded = 0;
  for (const BlockRead& r : reads) {
    if (r.status != ReadStatus::hit) {
      if (r.status == ReadStatus::corrupt) ++out.corrupt_blocks;
      break;
    }
    try {  // a payload of the wrong size for this model: a miss, like a failed checksum
      append_kv_payload(r.payload(), shape, B, rows, "KV block " + r.key.hex());
    } catch (const FormatError&) {
      ++out.corrupt_blocks;
      break;
    }
    out.bytes_read += static_cast<int64_t>(r.payload().size());
    loaded += B;
  }
  return loaded;
}

// Keeps only the rows of the first `tokens` tokens.
void truncate_rows(std::vector<GlobalKvRows>& rows, const SequenceState& shape, int64_t tokens) {
  for (size_t l = 0; l < rows.size(); ++l) {
    const GlobalKv& g = shape.global[l];
    if (g.ratio <= 0 || !g.entries.defined()) continue;
    const int64_t n = tokens / g.ratio;
    rows[l].n = n;
    rows[l].entries.resize(static_cast<size_t>(n * g.entries.dim(1)));
    rows[l].index_keys.resize(static_cast<size_t>(n * g.index_keys.dim(1)));
  }
}

bool has_span(std::span<const ImageSpan> spans, const ImageSpan& s) {
  return std::find(spans.begin(), spans.end(), s) != spans.end();
}

// A restored prefix's tokens come back as text tokens (load_prefix, apply_window_snapshot); its
// image tokens are marked again, as the prefill that first ran them did.
void mark_image_tokens(SequenceState& state, std::span<const ImageSpan> images) {
  const int64_t n = state.position();
  for (const ImageSpan& img : images)
    for (int64_t t = std::max<int64_t>(img.begin, 0); t < std::min(img.begin + img.length, n); ++t)
      state.dead[static_cast<size_t>(t)] = 1;
}

}  // namespace

int64_t image_safe_prefix(int64_t common, std::span<const ImageSpan> live_images,
                          std::span<const ImageSpan> prompt_images) {
  int64_t limit = common;
  for (const ImageSpan& s : prompt_images)
    if (s.begin < limit && !has_span(live_images, s)) limit = s.begin;
  for (const ImageSpan& s : live_images)
    if (s.begin < limit && !has_span(prompt_images, s)) limit = s.begin;
  return limit;
}

int64_t replay_length(const Model& model, int64_t prefix_tokens) {
  return std::min(model.config().text.sliding_window, prefix_tokens);
}

namespace {

// The choice among the sources, and what executing it needs.
struct PrefixChoice {
  Candidate best;
  int64_t live_common = 0;  // tokens the live state shares with the prompt (image-safe)
  LiveReuse live_reuse;     // how the live state gets there (extended, or cut back)
  PrefixMatch match;        // the SSD blocks' match of the prompt
  std::shared_ptr<const WindowSnapshot> snapshot;  // the pool's, when best is a pool candidate
};

// Keeps the candidate of least cost (the first of equal cost).
void consider(PrefixChoice& choice, const Candidate& c) {
  if (c.cost < choice.best.cost) choice.best = c;
}

// The live state as is (when the prompt extends it), or cut back to where they diverge
// (engine/runtime/live_reuse.h picks how).
void consider_live(PrefixChoice& choice, const SequenceState& live, std::span<const TokenId> prompt,
                   std::span<const ImageSpan> images, std::span<const ImageSpan> live_images) {
  const int64_t P = static_cast<int64_t>(prompt.size());
  choice.live_common = image_safe_prefix(static_cast<int64_t>(common_prefix(live.tokens, prompt)),
                                         live_images, images);
  choice.live_reuse = plan_live_reuse(live, P, choice.live_common);
  if (choice.live_reuse.kind != LiveReuse::Kind::none)
    consider(choice, {Candidate::Kind::live, choice.live_reuse.keep, choice.live_reuse.cost});
}

void consider_ssd(PrefixChoice& choice, const PrefixSources& src, std::span<const TokenId> prompt,
                  std::span<const ImageSpan> images) {
  const int64_t P = static_cast<int64_t>(prompt.size());
  choice.match = src.blocks->match_prefix(src.fingerprint, prompt.first(prompt.size() - 1), images);
  const int64_t C = choice.match.covered_tokens;
  if (C > 0) consider(choice, {Candidate::Kind::ssd, C, P - C + replay_length(src.model, C)});
}

// A parked window snapshot of this session, the longest that is cheaper than the best so far and
// whose global KV below it is on the SSD or in the live rows.
void consider_pool(PrefixChoice& choice, const PrefixSources& src, std::span<const TokenId> prompt,
                   std::span<const ImageSpan> images) {
  const int64_t P = static_cast<int64_t>(prompt.size());
  const int64_t B = src.blocks ? src.blocks->tokens_per_block() : 0;
  for (int64_t T : src.window_pool->token_counts(src.session_id)) {
    if (T > P - 1 || P - T >= choice.best.cost) continue;
    const int64_t base = floor_to(T, B);
    if (base > std::max(choice.match.covered_tokens, choice.live_common)) continue;
    const WindowKey key{
        src.session_id, T,
        prefix_digest(src.fingerprint, prompt.first(static_cast<size_t>(T)), images, B)};
    choice.snapshot = src.window_pool->find(key);
    if (!choice.snapshot) continue;
    consider(choice, {Candidate::Kind::pool, T, P - T, base});
    return;
  }
}

PrefixChoice choose_prefix(const PrefixSources& src, const std::optional<SequenceState>& live,
                           std::span<const TokenId> prompt, std::span<const ImageSpan> images,
                           std::span<const ImageSpan> live_images) {
  PrefixChoice choice;
  choice.best = {
      .kind = Candidate::Kind::none, .tokens = 0, .cost = static_cast<int64_t>(prompt.size())};
  if (live) consider_live(choice, *live, prompt, images, live_images);
  if (src.blocks) consider_ssd(choice, src, prompt, images);
  if (src.window_pool && src.session_id > 0) consider_pool(choice, src, prompt, images);
  return choice;
}

// Loads the first `tokens` of the prompt from `rows` and sets up their replay.
void restore_rows(Model& model, PlannedPrefill& out, std::span<const TokenId> prompt,
                  int64_t tokens, const std::vector<GlobalKvRows>& rows) {
  load_prefix(model.backend(), out.state, prompt.first(static_cast<size_t>(tokens)), rows);
  out.replay = replay_length(model, tokens);
}

// The live state extended or cut back as the choice says, kept as the prefill's state.
void load_live(Model& model, std::optional<SequenceState>& live, const PrefixChoice& choice,
               PlannedPrefill& out) {
  const auto t0 = SteadyClock::now();
  out.replay = apply_live_reuse(model.backend(), *live, choice.live_reuse);
  out.state = std::move(*live);
  out.reused_ram = choice.best.tokens;
  out.load_ms += ms_since(t0);
}

void load_ssd(const PrefixSources& src, const PrefixChoice& choice, std::span<const TokenId> prompt,
              PlannedPrefill& out) {
  std::vector<GlobalKvRows> rows;
  const int64_t got = read_ssd_rows(src, choice.match, choice.best.tokens, out.state, rows, out);
  const auto t0 = SteadyClock::now();
  if (got > 0) {
    restore_rows(src.model, out, prompt, got, rows);
    out.reused_ssd = got;
  }
  out.load_ms += ms_since(t0);
}

// The global KV below the snapshot's base from the live rows or the SSD, then the snapshot. A
// failed block leaves what was read before it, restored with a replay, and no snapshot.
void load_pool(const PrefixSources& src, const PrefixChoice& choice,
               std::optional<SequenceState>& live, std::span<const TokenId> prompt,
               PlannedPrefill& out) {
  Model& model = src.model;
  const int64_t base = choice.best.pool_base;
  std::vector<GlobalKvRows> rows;
  if (live && choice.live_common >= base) {
    rows = read_prefix_rows(model.backend(), *live, base);
    out.reused_ram = base;
  } else if (base > 0) {
    const int64_t got = read_ssd_rows(src, choice.match, base, out.state, rows, out);
    if (got < base) {
      live.reset();
      if (got > 0) {
        truncate_rows(rows, out.state, got);
        restore_rows(model, out, prompt, got, rows);
        out.reused_ssd = got;
      }
      return;
    }
    out.reused_ssd = base;
  } else {
    rows.assign(out.state.global.size(), GlobalKvRows{});
  }
  live.reset();
  const auto t0 = SteadyClock::now();
  apply_window_snapshot(model.backend(), out.state, choice.snapshot->bytes,
                        prompt.first(static_cast<size_t>(choice.best.tokens)), base, rows);
  out.reused_pool = choice.best.tokens - base;
  out.load_ms += ms_since(t0);
}

}  // namespace

PlannedPrefill plan_prefill(const PrefixSources& src, std::optional<SequenceState> live,
                            std::span<const TokenId> prompt, std::span<const ImageSpan> images,
                            std::span<const ImageSpan> live_images) {
  FD_CHECK(!prompt.empty(), "plan_prefill: empty prompt");
  const auto t0 = SteadyClock::now();
  PlannedPrefill out{.state = src.model.new_sequence()};
  const PrefixChoice choice = choose_prefix(src, live, prompt, images, live_images);
  out.plan_ms = ms_since(t0);
  switch (choice.best.kind) {
    case Candidate::Kind::none:
      break;
    case Candidate::Kind::live:
      load_live(src.model, live, choice, out);
      break;
    case Candidate::Kind::ssd:
      live.reset();
      load_ssd(src, choice, prompt, out);
      break;
    case Candidate::Kind::pool:
      load_pool(src, choice, live, prompt, out);
      break;
  }
  // A live state keeps its image marks (a cut keeps those below it).
  if (choice.best.kind != Candidate::Kind::live) mark_image_tokens(out.state, images);
  return out;
}

}  // namespace flashdesk::storage
