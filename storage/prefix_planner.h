// The prefix planner (docs/model-spec.md §3.9, docs/session-resume.md): for a rendered
// prompt, finds the longest usable cached prefix among the live KV of the session (as is, or cut
// back to where an edited or re-rendered history diverges: engine/runtime/live_reuse.h), the SSD
// block store
// (chained keys with the model fingerprint) and the DRAM window pool; loads the hits into a
// sequence state and says how many restored tokens the prefill must replay (encoder bounded
// replay rebuilds the window KV that was not kept) and where the uncached suffix starts.
//
// Goals: the cheapest restore by tokens to run (suffix + replay), with per-stage timing and
// counts; a damaged block is a miss (the store deletes it), never used; a prompt's images take
// part in every match (block keys, the pool's prefix digest, and the live KV only up to the first
// image whose digest differs), so another picture behind the same placeholder tokens never
// reuses KV. Restored image tokens are marked as image tokens again (SequenceState::dead: replay
// and Engram need it). Non-goals: writing blocks (kv_spill.h); encoding images (the caller's
// prefill embeds every image whose span reaches past first_prefill_index(), replay included).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/model/model.h"
#include "storage/kv_block_store.h"
#include "storage/window_pool.h"

namespace flashdesk::storage {

struct PrefixSources {
  Model& model;
  std::string fingerprint;            // the model's: part of every block key
  KvBlockStore* blocks = nullptr;     // null: no SSD tier
  WindowPool* window_pool = nullptr;  // null: no DRAM window tier
  int64_t session_id = 0;             // the window pool's owner key; 0 = none
  // Whether the SSD blocks read are linked to session_id (a stored session, whose delete then
  // keeps them for as long as it lives). False for owners that are no stored session: the API
  // server's conversations.
  bool link_blocks = true;
};

struct PlannedPrefill {
  SequenceState state;  // holds the reused prefix; the prefill continues it
  int64_t replay = 0;   // PrefillOptions::replay: the state's last tokens to run again
  // The prefill's ids are prompt[state.position() - replay, prompt.size()).
  int64_t first_prefill_index() const { return state.position() - replay; }

  int64_t reused_ram = 0;   // prefix tokens whose KV came from the live state
  int64_t reused_ssd = 0;   // from SSD blocks
  int64_t reused_pool = 0;  // past the blocks, from a parked window snapshot
  int64_t bytes_read = 0;   // SSD payload bytes
  int64_t corrupt_blocks = 0;
  double plan_ms = 0.0, read_ms = 0.0, load_ms = 0.0;
};

// `live` is consumed: its state is either continued or dropped. The last prompt token is never
// restored (the prefill needs at least one token to produce logits). `images` are the prompt's
// image spans, `live_images` those inside the live state's tokens.
PlannedPrefill plan_prefill(const PrefixSources& sources, std::optional<SequenceState> live,
                            std::span<const TokenId> prompt, std::span<const ImageSpan> images = {},
                            std::span<const ImageSpan> live_images = {});

// Tokens of `common` (a common token prefix of the live state and the prompt) that the live KV
// may serve: up to the first image that is not the same image at the same place in both.
int64_t image_safe_prefix(int64_t common, std::span<const ImageSpan> live_images,
                          std::span<const ImageSpan> prompt_images);

// Tokens of a restored prefix that a restore replays: min(W, prefix).
int64_t replay_length(const Model& model, int64_t prefix_tokens);

}  // namespace flashdesk::storage
