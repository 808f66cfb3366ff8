// Sizes derived from a config: parameter counts (total, by part, active per token), bytes by
// dtype, and the KV bytes per token the roles imply. What `inspect` prints and what the runtime
// reports as the persisted bytes it should be writing.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/tensor_spec.h"

namespace flashdesk {

// Logical parameters (a packed FP4 byte holds two; block scales count none).
struct ParameterCounts {
  int64_t total = 0;     // every tensor of expected_tensors()
  int64_t backbone = 0;  // embed, final norm, head and the main layers, Engram excluded
  int64_t engram = 0;    // Engram tables, wkv and q/k weights
  int64_t engram_tables = 0;
  int64_t vision = 0;  // tower, aligner, image delimiters
  int64_t dspark = 0;  // mtp.* stages
  // Per prompt token in bounded mode: encoder layers (top-k routed experts, the Engram rows a
  // token gathers), plus what projects the decoder's global KV from the encoder output (the
  // decoder's first layer's mHC attention mix, attn_norm, compressor and index-key projection).
  // The LM head is excluded (logits only for the last position). Equals active_decode minus the
  // head when the model has no decoder.
  int64_t active_prefill = 0;
  // Per generated token: every main layer (top-k experts, gathered Engram rows) plus the head.
  int64_t active_decode = 0;
};

ParameterCounts count_parameters(const ModelConfig& config);

struct DTypeTotal {
  DType dtype;
  int64_t tensors = 0;
  uint64_t bytes = 0;
};
// Bytes per stored dtype, in DType order, only dtypes that occur.
std::vector<DTypeTotal> bytes_by_dtype(const std::vector<TensorSpec>& specs);

struct KvBytesPerToken {
  double main = 0;     // compressed main KV: FP4 E2M1 + one E4M3 scale per 16 dims, / ratio
  double index = 0;    // index keys: FP4 E2M1 + one E8M0 scale per 32 dims, / ratio
  double encoder = 0;  // main + index of KV sources before the decoder
  double decoder = 0;
  double total() const { return main + index; }
  // Window rings (never persisted): main layers x sliding_window x (FP8 D + UE8M0 per 32).
  uint64_t window_bytes_per_sequence = 0;
  int64_t window_bytes_per_entry = 0;
};

// Persisted global-KV bytes per token: the sum over KV sources of (main + index entry) / ratio
// (890 B for the full-size config, docs/model-spec.md §6.3).
KvBytesPerToken kv_bytes_per_token(const ModelConfig& config);

}  // namespace flashdesk
