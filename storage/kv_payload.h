// The payload of an SSD KV block (docs/kv-block-store.md, "Payload"): for every KV-source layer in
// layer order, the global-KV entry rows of the block's tokens, then their index-key rows, exactly
// as the device holds them (kv_format.h layouts). A block of B tokens holds B / m rows of a source
// with compress ratio m, so B must be a multiple of every ratio.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/model/sequence_state.h"
#include "engine/ops/backend.h"

namespace flashdesk::storage {

// Bytes of one block of `tokens` tokens for a state shaped like `state` (from Model::new_sequence).
int64_t kv_payload_bytes(const SequenceState& state, int64_t tokens);

// The block of tokens [token_begin, token_begin + tokens) of `state`; every source must already
// hold those entries (FD_CHECK otherwise: the caller spills only completed blocks).
std::vector<uint8_t> encode_kv_payload(Backend& backend, const SequenceState& state,
                                       int64_t token_begin, int64_t tokens);

// Appends a block's rows to `rows` (one per main layer, as SequenceState::global; layers that own
// no KV stay empty). Throws FormatError naming `where` when the size does not match the model.
void append_kv_payload(std::span<const uint8_t> payload, const SequenceState& state, int64_t tokens,
                       std::vector<GlobalKvRows>& rows, std::string_view where);

// Every KV source's rows [0, tokens / m) of `state` (a live state's global KV, rolled back to a
// prefix of `tokens` tokens).
std::vector<GlobalKvRows> read_prefix_rows(Backend& backend, const SequenceState& state,
                                           int64_t tokens);

// A fresh-state copy of `fresh` (Model::new_sequence()) holding `prefix` as its tokens and `rows`
// as its global KV: what encoder bounded replay starts from.
void load_prefix(Backend& backend, SequenceState& fresh, std::span<const int32_t> prefix,
                 const std::vector<GlobalKvRows>& rows);

}  // namespace flashdesk::storage
