// The routed experts of a prefill-sized MoE step on the tensor cores (moe_grouped.cu): every
// expert's rows in one launch per stage, FP4 weights decoded in shared memory (no BF16 copy of
// the weights, no launch per expert).
#pragma once

#include <cstdint>
#include <span>

#include "engine/ops/cuda/device_context.h"

namespace flashdesk::cuda {

struct ExpertEntry;

// Whether the grouped kernels take these experts: every one present, on the device, FP4 rows
// (docs/checkpoint-format.md) with 16-byte aligned rows, inter a multiple of 64 and dim of 128.
bool grouped_experts_fit(std::span<const ExpertEntry> table, int64_t experts, int64_t dim);

// Whether the current device runs the Hopper kernels of moe_grouped_sm90a.cu (wgmma): a Hopper
// GPU (compute capability 9.0) and a binary with their sm_90a code; the emulation always.
// run_grouped_experts takes them then unless DeviceContext::wgmma_experts() is off.
bool grouped_wgmma_runs();

// o[slot] = bf16(w2 . act_quant(h)) with h = bf16(silu(min(g, L)) * clamp(u, +-L) * weight),
// g = bf16(w1 . act_quant(x[row])), u = bf16(w3 . act_quant(x[row])), for every (row, column)
// pair of the routing (the definition of docs/numerics.md "MoE"; FP32 sums in the tensor cores'
// order), slot = row * slots_per_row + column. `table` is the device copy of the entries, ids and
// weights [n, k] on the device (ids outside [0, experts) are skipped), xq [n, dim] the rows
// act_quant'ed to BF16 (act_quant_to_bf16; the caller stages them once for the shared expert
// too), o [n * slots_per_row, dim] F32. Queued on the context's stream; the host does not wait.
void run_grouped_experts(DeviceContext& ctx, const ExpertEntry* table, const int32_t* ids,
                         const float* weights, int64_t k, int64_t slots_per_row, int64_t experts,
                         const uint16_t* xq, int64_t n, int64_t dim, int64_t inter, float limit,
                         float* o);

}  // namespace flashdesk::cuda
