// Spilling a sequence's global KV to the SSD block store: every full block of its tokens not yet
// written is serialised (kv_payload.h) and queued; the store writes in the background.
#pragma once

#include <cstdint>
#include <future>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/model/sequence_state.h"
#include "engine/ops/backend.h"
#include "storage/kv_block_store.h"

namespace flashdesk::storage {

struct SpillResult {
  int64_t queued_blocks = 0;
  int64_t spilled_tokens = 0;  // tokens covered by the full blocks written or queued so far
  std::vector<std::future<WriteOutcome>> outcomes;
};

// Queues the full blocks of `state` from token `already_spilled` (a multiple of the block size)
// onwards. Keys chain from the first token, so equal prefixes of other sessions share the blocks;
// `images` (the spans of the images inside the state's tokens) enter the keys of the blocks they
// overlap.
SpillResult spill_blocks(KvBlockStore& store, Backend& backend, const SequenceState& state,
                         std::string_view fingerprint, std::optional<int64_t> session_id,
                         int64_t already_spilled, std::span<const ImageSpan> images = {});

}  // namespace flashdesk::storage
