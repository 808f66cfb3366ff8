// Hooks into the forward pass for cross-checking (docs/logits-dump.md): an observer sees the
// per-block values of a step as host copies and may replace each block's input. The model
// copies a tensor to the host only for an observer that is present.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "engine/model/host_tensor.h"

namespace flashdesk {

// Which sequence of the step and which position a row of an observed tensor belongs to.
struct RowInfo {
  int64_t seq = 0;       // index into the step's batch
  int64_t position = 0;  // token position in that sequence
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;

  // Embedding rows [n, D] (before they are copied into the hc streams).
  virtual void on_embed(std::span<const RowInfo>, const HostTensor&) {}
  // Engram of `layer`: hash ids [n, cols] (I64, table offsets included) and the streams after the
  // update [n, hc, D].
  virtual void on_engram(int64_t, std::span<const RowInfo>, const HostTensor&, const HostTensor&) {}
  // Attention output [n, D] (after wo_b) and MoE output [n, D], before the hc expansion.
  virtual void on_attn_out(int64_t, std::span<const RowInfo>, const HostTensor&) {}
  virtual void on_ffn_out(int64_t, std::span<const RowInfo>, const HostTensor&) {}
  // Selected experts [n, k] (I32, descending biased score) and their weights [n, k].
  virtual void on_experts(int64_t, std::span<const RowInfo>, const HostTensor&, const HostTensor&) {
  }
  // Index sources: the published top-k [n, k] (I32 entry ids, ascending, -1 = none) of the rows
  // of one sequence; k = index_topk (past the entries, -1).
  virtual void on_topk(int64_t, std::span<const RowInfo>, const HostTensor&) {}
  // The candidate source: kept candidate blocks [n, C] (I32, ascending, -1 = none) of one
  // sequence, with the block size and the number of entries.
  virtual void on_candidates(int64_t, std::span<const RowInfo>, const HostTensor&, int64_t,
                             int64_t) {}
  // A finer per-row F32 tensor of block `layer`, for cross-checking against the official code's
  // intermediates (tools/official_goldens.py records the same): attn_q [n, H, D] (after RoPE),
  // attn_raw / attn_unrot [n, H, D] (attention output before / after the inverse RoPE),
  // attn_wo_a [n, G * o_lora], hc_attn_pre / hc_ffn_pre / ..._post [n, hc], ..._comb [n, hc, hc].
  virtual void on_layer_tensor(int64_t, std::string_view, std::span<const RowInfo>,
                               const HostTensor&) {}
  // The stream [n, hc, D] and the pre-mix [n, hc] a block hands to the next.
  virtual void on_block_out(int64_t, std::span<const RowInfo>, const HostTensor&,
                            const HostTensor&) {}

  // Block-input override (teacher forcing per block): when overrides_block_inputs(), called
  // before block `layer` runs with its input stream [n, hc, D] and incoming pre-mix [n, hc];
  // whatever the observer leaves in them is what the block runs on.
  virtual bool overrides_block_inputs() const { return false; }
  virtual void override_block_input(int64_t, std::span<const RowInfo>, HostTensor&, HostTensor&) {}
};

}  // namespace flashdesk
