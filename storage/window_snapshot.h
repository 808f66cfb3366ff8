// The bytes the DRAM window pool holds for a parked sequence (never persisted, in-process only):
// the window rings of every layer, plus what a restore from SSD blocks lacks past the last full
// block: each KV source's entries from `base` tokens on and its pending compressor tokens. With
// the blocks below `base` and this snapshot, a state is rebuilt exactly, with no replay.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/sequence_state.h"
#include "engine/ops/backend.h"

namespace flashdesk::storage {

// `base` must be a multiple of every compress ratio and at most state.position().
std::vector<uint8_t> encode_window_snapshot(Backend& backend, const SequenceState& state,
                                            int64_t base);

// Fills the fresh state `fresh` (Model::new_sequence()) with `prefix` (the snapshot's tokens),
// `rows_below_base` (each source's rows [0, base / m), as read from SSD blocks or a live state)
// and the snapshot. Throws FormatError when the snapshot does not match the state's shapes.
void apply_window_snapshot(Backend& backend, SequenceState& fresh, std::span<const uint8_t> bytes,
                           std::span<const int32_t> prefix, int64_t base,
                           const std::vector<GlobalKvRows>& rows_below_base);

}  // namespace flashdesk::storage
