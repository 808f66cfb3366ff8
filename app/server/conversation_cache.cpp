// The API conversations' KV: live slots, then the window pool and the SSD blocks
// (conversation_cache.h).
#include "app/server/conversation_cache.h"

#include <algorithm>

#include "engine/model/sequence_cut.h"
#include "engine/util/error.h"
#include "storage/kv_spill.h"
#include "storage/window_snapshot.h"

namespace flashdesk::server {

ConversationCache::ConversationCache(ChatEngine& engine, int live_slots, KvTiers tiers)
    : engine_(engine), fingerprint_(engine.fingerprint()), tiers_(tiers) {
  if (live_slots < 1) throw InvalidRequest("at least one conversation must be kept");
  if (!tiers_.blocks) tiers_.window_pool = nullptr;  // a parked window needs its blocks below
  slots_.resize(static_cast<size_t>(live_slots));
}

ConversationCache::~ConversationCache() = default;

// The slot whose live KV the prompt continues (all of it a prefix of the prompt), the longest;
// else an empty slot; else the slot whose live tokens share the longest prefix with `prompt`, the
// least recently used among equals. A new conversation takes an empty slot before a live one
// whose start it shares (a system prompt, the template's first tokens): that one would be cut
// back to the shared part, and without a window pool its conversation lost.
size_t ConversationCache::choose_slot(std::span<const TokenId> prompt) const {
  std::optional<size_t> continued, empty;
  size_t continued_length = 0, best = 0, best_common = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = slots_[i];
    if (!slot.live) {
      if (!empty) empty = i;
      continue;
    }
    const size_t common = common_prefix(slot.live->tokens, prompt);
    const auto live = static_cast<size_t>(slot.live->position());
    if (common >= live && live > 0 && (!continued || live > continued_length)) {
      continued = i;
      continued_length = live;
    }
    if (common > best_common ||
        (common == best_common && slot.last_used < slots_[best].last_used)) {
      best = i;
      best_common = common;
    }
  }
  if (continued) return *continued;
  if (empty) return *empty;
  return best;
}

// The slot's conversation is about to lose its live KV: its window (and its global KV past the
// last full block) is parked, so coming back restores it exactly from the pool and the blocks.
void ConversationCache::park(Slot& slot) {
  if (!tiers_.window_pool || !slot.live || slot.live->position() == 0) return;
  const int64_t B = tiers_.blocks->tokens_per_block();
  const int64_t T = slot.live->position();
  const storage::WindowKey key{
      kPoolOwner, T, storage::prefix_digest(fingerprint_, slot.live->tokens, slot.images, B)};
  tiers_.window_pool->park(
      key, storage::encode_window_snapshot(engine_.backend(), *slot.live, T / B * B));
}

ConversationCache::Lease ConversationCache::restore(std::span<const TokenId> prompt,
                                                    std::span<const storage::ImageSpan> images) {
  Lease lease{.slot = choose_slot(prompt), .plan = {}};
  Slot& slot = slots_[lease.slot];
  slot.last_used = ++clock_;
  if (slot.live && common_prefix(slot.live->tokens, prompt) < size_t(slot.live->position()))
    park(slot);  // another conversation, or this one edited: keep what the slot held
  const storage::PrefixSources sources{.model = engine_.model(),
                                       .fingerprint = fingerprint_,
                                       .blocks = tiers_.blocks,
                                       .window_pool = tiers_.window_pool,
                                       .session_id = kPoolOwner,
                                       .link_blocks = false};
  const int64_t spilled_before = slot.spilled;
  lease.plan = storage::plan_prefill(sources, std::move(slot.live), prompt, images, slot.images);
  slot.live.reset();
  slot.images.clear();
  // Blocks below the reused live prefix, or restored from the SSD, are on the SSD already.
  const int64_t B = tiers_.blocks ? tiers_.blocks->tokens_per_block() : 1;
  const storage::PlannedPrefill& plan = lease.plan;
  slot.spilled =
      std::max(plan.reused_ram > 0 ? std::min(spilled_before, plan.reused_ram / B * B) : int64_t{0},
               plan.reused_ssd);
  return lease;
}

void ConversationCache::spill(Slot& slot) {
  if (!tiers_.blocks) return;
  const storage::SpillResult r =
      storage::spill_blocks(*tiers_.blocks, engine_.backend(), *slot.live, fingerprint_,
                            std::nullopt, slot.spilled, slot.images);
  slot.spilled = r.spilled_tokens;
}

void ConversationCache::keep(Lease lease, std::vector<storage::ImageSpan> images) {
  Slot& slot = slots_[lease.slot];
  slot.live = std::move(lease.plan.state);
  slot.images = std::move(images);
  if (slot.live->mark) cut_sequence(engine_.backend(), *slot.live, slot.live->mark->position);
  spill(slot);
}

}  // namespace flashdesk::server
