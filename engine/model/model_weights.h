// The weights of the V4.1 text model as backend handles, uploaded once from a checkpoint and
// sliced for this rank by the sharding table (sharding.h). Shapes are the rank-local ones.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/model/sharding.h"
#include "engine/ops/backend.h"

namespace flashdesk {

struct CompressorWeights {  // KV sources only
  LinearWeight wkv;         // [D, dim] BF16
  LinearWeight wgate;       // [D, dim] BF16, ratio > 1 only
  Tensor norm;              // [D]
  LinearWeight index_wk;    // [d_ih, D] BF16
  Tensor index_k_norm;      // [d_ih]
};

struct IndexerWeights {       // index sources only
  LinearWeight wq_b;          // [n_ih * d_ih, q_lora] FP8
  LinearWeight weights_proj;  // [n_ih, dim] BF16
};

struct AttentionWeights {
  LinearWeight wq_a;  // [q_lora, dim] FP8
  Tensor q_norm;      // [q_lora]
  LinearWeight wq_b;  // [H_local * D, q_lora] FP8
  LinearWeight wkv;   // [D, dim] FP8
  Tensor kv_norm;     // [D]
  LinearWeight wo_a;  // [G_local * o_lora, (H/G) * D] FP8 used as BF16
  LinearWeight wo_b;  // [dim, G_local * o_lora] FP8
  Tensor sink;        // [H_local] F32
  std::optional<CompressorWeights> compressor;
  std::optional<IndexerWeights> indexer;
};

struct MoeWeights {
  LinearWeight gate;                          // [E, dim] BF16, used in FP32
  Tensor bias;                                // [E] F32
  Tensor bias_vl;                             // [E] F32 (image-span tokens)
  std::vector<ExpertWeights> local_experts;   // the experts this rank holds
  std::vector<const ExpertWeights*> experts;  // [E]: pointer into local_experts or null
  std::optional<ExpertWeights> shared;        // rank 0 only
};

struct EngramWeights {
  QuantTable table;  // [rows, head_dim] FP8 + per-32 scales
  LinearWeight wkv;  // [(hc + 1) * dim, (ngram - 1) * heads * head_dim] FP8
  Tensor q_weight;   // [hc, dim] F32
  Tensor k_weight;   // [hc, dim] F32
};

struct LayerWeights {
  Tensor attn_norm, ffn_norm;  // [dim]
  HcParams hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights ffn;
  std::optional<EngramWeights> engram;
};

// The DSpark draft head (docs/dspark.md): stages mtp.0..S-1 are blocks like the main ones
// (window-only attention, their own MoE); stage 0 conditions on the target features, the last
// stage holds the final norm, the Markov head and the confidence head.
struct DsparkWeights {
  LinearWeight main_proj;            // [dim, targets * dim] FP8
  Tensor main_norm;                  // [dim]
  std::vector<LayerWeights> stages;  // attention without compressor or indexer
  Tensor norm;                       // [dim] (last stage)
  Tensor markov_embed;               // [V, rank] BF16
  LinearWeight markov_head;          // [V, rank] BF16, used in FP32
  LinearWeight confidence;           // [1, dim + rank] BF16, used in FP32
};

struct ModelWeights {
  Tensor embed;       // [V, dim] BF16
  LinearWeight head;  // [V, dim] BF16, used in FP32
  Tensor norm;        // [dim]
  std::vector<LayerWeights> layers;
  std::optional<DsparkWeights> dspark;  // a checkpoint with DSpark stages, on a single device
};

class LoadProgressTracker;

// `progress` (may be null) is told of each tensor after its upload. The routed experts of layers
// >= host_experts_from (when >= 0) stay in host memory (the hybrid placement: a device backend
// computes them on the CPU).
ModelWeights load_model_weights(const Checkpoint& ckpt, const std::vector<LayerRole>& roles,
                                Backend& backend, const ShardPlan& plan,
                                LoadProgressTracker* progress = nullptr,
                                int64_t host_experts_from = -1);

}  // namespace flashdesk
