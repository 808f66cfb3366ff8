// Serialising the completed blocks of a sequence and queueing them on the block store.
#include "storage/kv_spill.h"

#include "engine/util/error.h"
#include "storage/kv_payload.h"

namespace flashdesk::storage {

SpillResult spill_blocks(KvBlockStore& store, Backend& backend, const SequenceState& state,
                         std::string_view fingerprint, std::optional<int64_t> session_id,
                         int64_t already_spilled, std::span<const ImageSpan> images) {
  const int64_t B = store.tokens_per_block();
  FD_CHECK(already_spilled >= 0 && already_spilled % B == 0, "spill must start at a block");
  SpillResult result;
  const int64_t full = state.position() / B;
  result.spilled_tokens = std::max(already_spilled, full * B);
  if (already_spilled >= full * B) return result;
  const std::vector<BlockKey> keys = chain_block_keys(fingerprint, state.tokens, images, B);
  for (int64_t i = already_spilled / B; i < full; ++i) {
    BlockWrite w;
    w.key = keys[static_cast<size_t>(i)];
    if (i > 0) w.parent = keys[static_cast<size_t>(i - 1)];
    w.model_fingerprint = std::string(fingerprint);
    w.token_count = B;
    w.payload = encode_kv_payload(backend, state, i * B, B);
    w.session_id = session_id;
    result.outcomes.push_back(store.put(std::move(w)));
    ++result.queued_blocks;
  }
  return result;
}

}  // namespace flashdesk::storage
