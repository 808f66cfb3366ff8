// The KV of the API's conversations: the live sequences of the last few, and behind them the same
// tiers as the app's stored sessions (storage/prefix_planner.h): the DRAM window pool, where a
// conversation's window is parked when its live slot goes to another, and the SSD block store,
// where every turn's full global-KV blocks are spilled. A client resends the whole history each
// turn; the cheapest of these serves its prefix, so a long conversation costs only its new tokens
// after its live KV was evicted too, and after a restart (the blocks, with bounded replay).
//
// Goals: the planner's choice as for a stored session (live as is or cut back, pool, SSD blocks);
// the slot whose live KV a prompt continues serves it, else an empty slot, else the slot sharing
// the longest prefix (least recently used among equals), whose conversation is parked first; blocks
// keyed by content, so equal prefixes share them with each other and with the app's sessions.
// Non-goals: the conversations' messages (clients send them), several turns at once (the server's
// TurnQueue runs one).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/chat_engine.h"
#include "storage/kv_block_store.h"
#include "storage/prefix_planner.h"
#include "storage/window_pool.h"

namespace flashdesk::server {

// The stores the server's conversations share (owned elsewhere, outliving the server). Without a
// block store there is neither SSD tier nor window pool: the live slots only.
struct KvTiers {
  storage::KvBlockStore* blocks = nullptr;
  storage::WindowPool* window_pool = nullptr;
};

class ConversationCache {
 public:
  // The window pool's owner id of API conversations: they have no stored session, and stored
  // sessions' ids (SQLite row ids) never come near it.
  static constexpr int64_t kPoolOwner = std::numeric_limits<int64_t>::max();

  // A turn's restored prefix, in the state the prefill continues; back with keep().
  struct Lease {
    size_t slot = 0;
    storage::PlannedPrefill plan;
  };

  // `live_slots` >= 1 conversations keep their live KV.
  ConversationCache(ChatEngine& engine, int live_slots, KvTiers tiers);
  ~ConversationCache();

  // The cheapest cached prefix of `prompt` (whose images are `images`, in prompt order).
  Lease restore(std::span<const TokenId> prompt, std::span<const storage::ImageSpan> images);
  // After the turn generated from lease.plan.state: the state becomes its slot's live KV (cut
  // back to its thinking mark: the next rendering replaces the prompt's <think>), and its new
  // full blocks are spilled. A lease dropped instead (a failed turn) leaves the slot empty.
  void keep(Lease lease, std::vector<storage::ImageSpan> images);

 private:
  struct Slot {
    std::optional<SequenceState> live;
    std::vector<storage::ImageSpan> images;  // the images inside live's tokens
    int64_t spilled = 0;                     // tokens of live whose blocks are written or queued
    uint64_t last_used = 0;
  };
  size_t choose_slot(std::span<const TokenId> prompt) const;
  void park(Slot& slot);
  void spill(Slot& slot);

  ChatEngine& engine_;
  std::string fingerprint_;
  KvTiers tiers_;
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;  // counts turns, for least-recently-used
};

}  // namespace flashdesk::server
