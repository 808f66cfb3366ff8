// The projections every attention block starts with, in the main layers and the DSpark stages
// alike (MODEL-REFERENCE §3): the query latent, the query with RoPE, and the window key/value row
// normed with RoPE and quantised, in the reference's rounding order.
#pragma once

#include <cstdint>
#include <functional>
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

// Work the query's projections do not read, issued in beside sections next to them (the
// compressor and the indexer of a layer where Backend::indexer_beside_query says so): `with_kv`
// after the key/value row in its section, `with_qr` in a section of its own once the query latent
// exists (the indexer reads it). Both are joined before project_attention_inputs returns.
// `after_sections` is called once the sections joined here have been issued (after the key/value
// row's, or after with_qr's where there is one): the place for beside work of the caller's own
// that the attention does not wait for (the sublayer's mixes), which issued before them would
// hold them back (a backend's beside lane runs its sections in order).
struct BesideWork {
  std::function<void()> with_kv;
  std::function<void(const Tensor& qr)> with_qr;
  std::function<void()> after_sections;
};

AttentionInputs project_attention_inputs(Backend& be, const AttentionWeights& A,
                                         const TextConfig& text, const Tensor& x,
                                         std::span<const int64_t> positions,
                                         std::span<const float> inv_freq,
                                         const BesideWork* beside = nullptr);

}  // namespace flashdesk
