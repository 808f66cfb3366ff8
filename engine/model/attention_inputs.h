// The projections every attention block starts with, in the main layers and the DSpark stages
// alike (MODEL-REFERENCE §3): the query latent, the query with RoPE, and the window key/value row
// normed with RoPE and quantised, in the reference's rounding order.
#pragma once

#include <cstdint>
#include <span>

#include "engine/checkpoint/config.h"
#include "engine/model/model_weights.h"
#include "engine/ops/backend.h"

namespace flashdesk {

struct AttentionInputs {
  Tensor qr;  // [n, q_lora_rank]: q_norm(wq_a(x)), which the indexer reads too
  Tensor q;   // [n, heads, head_dim]: wq_b(qr) with RoPE
  // [n, kv_row_bytes(Fp8Window, head_dim)]: kv_norm(wkv(x)) with RoPE, quantised as a window row
  Tensor step_kv;
};

AttentionInputs project_attention_inputs(Backend& be, const AttentionWeights& A,
                                         const TextConfig& text, const Tensor& x,
                                         std::span<const int64_t> positions,
                                         std::span<const float> inv_freq);

}  // namespace flashdesk
