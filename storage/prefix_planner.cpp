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
  if (src.session_id > 0) session = src.session_id;
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

PlannedPrefill plan_prefill(const PrefixSources& src, std::optional<SequenceState> live,
                            std::span<const TokenId> prompt, std::span<const ImageSpan> images,
                            std::span<const ImageSpan> live_images) {
  FD_CHECK(!prompt.empty(), "plan_prefill: empty prompt");
  const auto t0 = SteadyClock::now();
  Model& model = src.model;
  const int64_t P = static_cast<int64_t>(prompt.size());
  const int64_t usable = P - 1;  // at least one token is prefilled
  PlannedPrefill out{.state = model.new_sequence()};

  Candidate best{.kind = Candidate::Kind::none, .tokens = 0, .cost = P};
  auto consider = [&](Candidate c) {
    if (c.cost < best.cost) best = c;
  };
  int64_t live_common = 0;
  LiveReuse live_reuse;
  if (live) {
    live_common = image_safe_prefix(static_cast<int64_t>(common_prefix(live->tokens, prompt)),
                                    live_images, images);
    live_reuse = plan_live_reuse(*live, P, live_common);
    if (live_reuse.kind != LiveReuse::Kind::none)
      consider({Candidate::Kind::live, live_reuse.keep, live_reuse.cost});
  }
  PrefixMatch match;
  if (src.blocks) {
    match = src.blocks->match_prefix(src.fingerprint, prompt.first(static_cast<size_t>(usable)),
                                     images);
    const int64_t C = match.covered_tokens;
    if (C > 0) consider({Candidate::Kind::ssd, C, P - C + replay_length(model, C)});
  }
  std::shared_ptr<const WindowSnapshot> snapshot;
  if (src.window_pool && src.session_id > 0) {
    const int64_t B = src.blocks ? src.blocks->tokens_per_block() : 0;
    for (int64_t T : src.window_pool->token_counts(src.session_id)) {
      if (T > usable || P - T >= best.cost) continue;
      // The snapshot holds the global KV past the last full block; the blocks come from SSD (or
      // the live rows when they reach that far).
      const int64_t base = floor_to(T, B);
      if (base > std::max(match.covered_tokens, live_common)) continue;
      const WindowKey key{
          src.session_id, T,
          prefix_digest(src.fingerprint, prompt.first(static_cast<size_t>(T)), images, B)};
      snapshot = src.window_pool->find(key);
      if (!snapshot) continue;
      consider({Candidate::Kind::pool, T, P - T, base});
      break;
    }
  }
  out.plan_ms = ms_since(t0);

  std::vector<GlobalKvRows> rows;
  switch (best.kind) {
    case Candidate::Kind::none:
      break;
    case Candidate::Kind::live: {
      const auto t2 = SteadyClock::now();
      out.replay = apply_live_reuse(model.backend(), *live, live_reuse);
      out.state = std::move(*live);
      out.reused_ram = best.tokens;
      out.load_ms += ms_since(t2);
      break;
    }
    case Candidate::Kind::ssd: {
      live.reset();
      const int64_t got = read_ssd_rows(src, match, best.tokens, out.state, rows, out);
      const auto t2 = SteadyClock::now();
      if (got > 0) {
        load_prefix(model.backend(), out.state, prompt.first(static_cast<size_t>(got)), rows);
        out.reused_ssd = got;
        out.replay = replay_length(model, got);
      }
      out.load_ms += ms_since(t2);
      break;
    }
    case Candidate::Kind::pool: {
      const int64_t base = best.pool_base;
      if (live && live_common >= base) {
        rows = read_prefix_rows(model.backend(), *live, base);
        out.reused_ram = base;
      } else if (base > 0) {
        const int64_t got = read_ssd_rows(src, match, base, out.state, rows, out);
        if (got < base) {  // a block failed: restore what was read and replay
          live.reset();
          if (got > 0) {
            truncate_rows(rows, out.state, got);
            load_prefix(model.backend(), out.state, prompt.first(static_cast<size_t>(got)), rows);
            out.reused_ssd = got;
            out.replay = replay_length(model, got);
          }
          break;
        }
        out.reused_ssd = base;
      } else {
        rows.assign(out.state.global.size(), GlobalKvRows{});
      }
      live.reset();
      const auto t2 = SteadyClock::now();
      apply_window_snapshot(model.backend(), out.state, snapshot->bytes,
                            prompt.first(static_cast<size_t>(best.tokens)), base, rows);
      out.reused_pool = best.tokens - base;
      out.load_ms += ms_since(t2);
      break;
    }
  }
  if (best.kind != Candidate::Kind::live) mark_image_tokens(out.state, images);  // a cut keeps them
  return out;
}

}  // namespace flashdesk::storage
