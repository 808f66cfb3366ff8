// The decode experts (up to 8 activation rows, one grouped slot per row and expert) on the tensor
// cores: mma.sync m16n8k16 with FP16 inputs and FP32 sums (sm_80 and later). FP4 and FP8 weight
// codes become FP16 values in registers by bit arithmetic (exact: every E2M1 and E4M3 value is an
// FP16 value, scaled by a power of two), activations are act_quant'ed once into E4M3 values held
// as FP16. Every product is exact, and each 32-column block's sum is scaled by its weight and
// activation scales and added in FP32: the structure of the CUDA-core kernels (moe.cu), which
// needed ~200 instructions a 512-byte warp step of FP4 weights to decode and multiply (Nsight
// Compute: issue-bound at 0.6 instructions a cycle a scheduler, 1.2-1.8 TB/s on the H200).
#pragma once

#include <cstdint>
#include <span>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/moe_slots.cuh"

namespace flashdesk::cuda {

// Whether the kernels take these experts (entries [0, E], absent ones null): every matrix FP4
// rows (K a multiple of 128, scale rows of whole words) or FP8 blocks (K a multiple of 64), K at
// most 8192, rows 16-byte aligned.
bool decode_experts_tc_fit(std::span<const ExpertEntry> table);

// h[slot] = bf16(silu(min(g, L)) * clamp(u, +-L) * weight) over the slots of `a` (the shared
// slot in a.shared_parts parts over K, whose sums are added in part order), then o[slot] =
// bf16(w2 . act_quant(h[slot])) (F32 [slots, dim]), as the CUDA-core kernels compute them; x [n,
// dim]. y (optional, [n, dim]): each row's slots summed as expert_sum_kernel does (moe.cu), by the
// down kernel; every slot of a row must be in `a` (the shared one not set apart).
void run_decode_experts_tc(DeviceContext& ctx, const SlotArgs& a, const float* x, int64_t dim,
                           int64_t max_inter, float* o, float* y);

}  // namespace flashdesk::cuda
