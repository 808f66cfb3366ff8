// The version of the numbers the engine writes into KV caches, part of every checkpoint
// fingerprint and therefore of every SSD block key and DRAM window key.
#pragma once

#include <cstdint>

namespace flashdesk {

// Bump this whenever a change to the engine would change cached KV values for the same weights
// and tokens: a kernel's rounding or summation order, a quantisation rule, a cache byte layout,
// the attention, indexer or compressor numerics. KV saved by an older engine is then never loaded
// (its keys no longer match) and is evicted in time, instead of being mixed with new values.
// 2: the official V4.1 numerics (issue 15: blocked FP8/FP4 GEMM sums, the sparse-attention
//    kernel's online softmax, BF16 index scores, torch's top-k ties).
inline constexpr uint32_t kKvNumericsVersion = 2;

}  // namespace flashdesk
