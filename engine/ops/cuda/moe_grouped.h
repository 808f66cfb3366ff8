// The routed experts of a prefill-sized MoE step on the tensor cores (moe_grouped.cu): every
// expert's rows in one launch per stage, FP4 weights decoded in shared memory (no BF16 copy of
// the weights, no launch per expert).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/ops/cuda/device_context.h"

namespace flashdesk::cuda {

struct ExpertEntry;

// The (row, column) pairs of the step's top-k grouped by expert, in ascending expert id and, in
// an expert, ascending row; and the 64-row tiles the kernels run.
struct ExpertRowPlan {
  std::vector<int32_t> rows;   // the token row of each pair
  std::vector<int32_t> slots;  // its slot in the output: row * slots_per_row + column
  std::vector<float> weights;  // its routing weight
  std::vector<int32_t> tiles;  // [tiles][3]: expert, first pair, pairs (<= 64)
};
ExpertRowPlan plan_expert_rows(std::span<const int32_t> ids, std::span<const float> weights,
                               int64_t k, int64_t slots_per_row, int64_t experts);

// Whether the grouped kernels take these experts: every one present, on the device, FP4 rows
// (docs/checkpoint-format.md) with 16-byte aligned rows, inter a multiple of 64 and dim of 128.
bool grouped_experts_fit(std::span<const ExpertEntry> table, int64_t experts, int64_t dim);

// o[slot] = bf16(w2 . act_quant(h)) with h = bf16(silu(min(g, L)) * clamp(u, +-L) * weight),
// g = bf16(w1 . act_quant(x[row])), u = bf16(w3 . act_quant(x[row])), for every pair of the plan
// (the definition of docs/numerics.md "MoE"; FP32 sums in the tensor cores' order). `table` is
// the device copy of the entries, x [n, dim] F32, o [n * slots_per_row, dim] F32.
void run_grouped_experts(DeviceContext& ctx, const ExpertEntry* table, const ExpertRowPlan& plan,
                         const float* x, int64_t n, int64_t dim, int64_t inter, float limit,
                         float* o);

}  // namespace flashdesk::cuda
