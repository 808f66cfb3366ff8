// How the weights split across the devices of one host (multi-GPU), as a data table like the
// reference's column/row-parallel linear types: attention by heads (the single-head KV, the
// compressor and the indexer replicated), routed experts by rank, dense parts replicated.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace flashdesk {

enum class ShardSplit : uint8_t {
  Replicated,      // every rank holds the whole tensor and computes the same values
  RowsByHead,      // output rows split by attention head (column-parallel: wq_b)
  VectorByHead,    // a per-head vector (attn_sink)
  RowsByGroup,     // output rows split by output group (wo_a; its heads are the rank's heads)
  ColumnsByGroup,  // input columns split by group (row-parallel wo_b: FP32 partial sums, reduced)
  ExpertsByRank,   // routed expert e lives on rank e * world / n_experts (contiguous ranges)
  FirstRankOnly,   // the shared expert: computed once, its output joins the reduction
};

struct ShardRule {
  std::string_view pattern;  // a substring of the tensor name
  ShardSplit split;
};

// First matching rule wins; no match = Replicated.
inline constexpr std::array<ShardRule, 6> kShardRules = {{
    {".attn.wq_b.", ShardSplit::RowsByHead},
    {".attn.attn_sink", ShardSplit::VectorByHead},
    {".attn.wo_a.", ShardSplit::RowsByGroup},
    {".attn.wo_b.", ShardSplit::ColumnsByGroup},
    {".ffn.experts.", ShardSplit::ExpertsByRank},
    {".ffn.shared_experts.", ShardSplit::FirstRankOnly},
}};

inline ShardSplit shard_split(std::string_view tensor_name) {
  for (const auto& rule : kShardRules)
    if (tensor_name.find(rule.pattern) != std::string_view::npos) return rule.split;
  return ShardSplit::Replicated;
}

// The part of the model one rank holds.
struct ShardPlan {
  int rank = 0;
  int world = 1;
};

}  // namespace flashdesk
