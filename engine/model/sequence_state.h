// The per-sequence state of the forward pass: every token so far, a window ring per main layer,
// and the global KV (compressed entries, index keys, pending compressor tokens) of each KV
// source. docs/engine-ops.md ("Sequence state") describes the layout and how a restore fills it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/ops/backend.h"

namespace flashdesk {

// The 128-slot (sliding_window) ring of one layer: FP8 window KV of the last W positions.
struct WindowRing {
  Tensor rows;                     // U8 [W, kv_row_bytes(Fp8Window, head_dim)], slot = pos mod W
  std::vector<int64_t> positions;  // [W] the position each slot holds, -1 = empty
};

// The global KV a KV-source layer owns, read by the layers that reuse it.
struct GlobalKv {
  int64_t ratio = 0;                 // compress ratio m: entry j covers positions [j*m, j*m+m)
  Tensor entries;                    // U8 [capacity, kv_row_bytes(Fp4Entry, head_dim)]
  Tensor index_keys;                 // U8 [capacity, kv_row_bytes(Fp4Key, index_head_dim)]
  int64_t n_entries = 0;             // rows [0, n_entries) hold entries 0..n_entries-1
  Tensor pending_kv, pending_score;  // F32 [m, head_dim]: projections of an incomplete group
  int64_t n_pending = 0;             // tokens of the incomplete group (< m)

  int64_t capacity() const { return entries.defined() ? entries.rows() : 0; }
};

// What a state held at one earlier position beyond its tokens and global entries (which only
// grow): every window ring and every pending compressor group. Kept by a prefill asked to
// (PrefillOptions::mark_at), it lets cut_sequence go back to that position exactly.
struct WindowMark {
  int64_t position = 0;
  std::vector<WindowRing> rings;  // copies, one per main layer
  std::vector<GlobalKv> global;   // per main layer: n_entries and the pending group (copies);
                                  // entries and index_keys are left undefined
};

// What one step writes that rolling its last rows back needs (sequence_rollback.h): the window
// and pending groups before the step, and the compressor projections of the step's rows.
struct RollbackLog {
  WindowMark before;              // at the step's first position
  std::vector<Tensor> kv, score;  // per main layer: F32 [rows, head_dim] of ratio > 1 sources
};

struct SequenceState {
  std::vector<int32_t> tokens;          // every token processed, position 0 first
  std::vector<uint8_t> dead;            // per token: 1 = image-span token (cuts Engram look-back)
  std::vector<WindowRing> rings;        // one per main layer
  std::vector<GlobalKv> global;         // one per main layer; ratio 0 for layers that own none
  std::optional<WindowMark> mark;       // the window at one earlier position (sequence_cut.h)
  std::optional<RollbackLog> rollback;  // held across one step that may be rolled back

  int64_t position() const { return static_cast<int64_t>(tokens.size()); }
  // Bytes of global KV held per token (what a prefix cache persists), for reports.
  int64_t global_bytes() const;
};

// Persisted global KV of a KV source: entries [first, first + n) and their index keys, as the
// raw cache rows (kv_format.h layouts).
struct GlobalKvRows {
  int64_t n = 0;
  std::vector<uint8_t> entries;     // n x kv_row_bytes(Fp4Entry, head_dim)
  std::vector<uint8_t> index_keys;  // n x kv_row_bytes(Fp4Key, index_head_dim)
};
GlobalKvRows read_global_kv(Backend& backend, const GlobalKv& kv, int64_t first, int64_t n);
// Restore: the source's entries become exactly `rows` (entries 0..n-1); pending compressor tokens
// are cleared, a replay of the prefix tail recomputes them.
void restore_global_kv(Backend& backend, GlobalKv& kv, const GlobalKvRows& rows);

// Grows a KV source's entry and key buffers to hold at least `n` entries (doubling), keeping
// their contents.
void reserve_entries(Backend& backend, GlobalKv& kv, int64_t n);

}  // namespace flashdesk
