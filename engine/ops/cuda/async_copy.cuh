// Asynchronous global-to-shared copies (cp.async, sm_80 and later): a lane puts 16 bytes in
// flight without holding registers for them, so a warp keeps several steps of weight loads
// outstanding while it computes on an earlier one (moe_decode_tc.cu). Copies are committed in
// groups; async_wait<N>() returns when all but the N most recent groups of the calling thread
// have landed and makes them visible to that thread (a warp barrier then shows them to the other
// lanes). The emulation (emu/cuda_emu.h) lands a group only at the wait, so a read too early
// fails there.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/cuda_compat.cuh"

namespace flashdesk::cuda {

// kBytes (4, 8 or 16) bytes to shared dst from global src, both aligned to kBytes: through L1
// (.ca, the only form for 4 and 8 bytes: the attention's key rows of head dims under 512), or
// past it (kBypassL1, 16 bytes: weights, read once a step).
template <int kBytes, bool kBypassL1 = false>
__device__ __forceinline__ void async_copy(void* dst, const void* src) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  static_assert(!kBypassL1 || kBytes == 16, "cp.async.cg copies 16 bytes");
#ifdef FLASHDESK_CUDA_EMU
  fd_emu::async_copy(dst, src, kBytes);
#else
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (kBypassL1)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(src), "n"(kBytes)
                 : "memory");
#endif
}

// 16 bytes past L1, the weights' and pairs' copies.
__device__ __forceinline__ void async_copy16(void* dst, const void* src) {
  async_copy<16, true>(dst, src);
}

__device__ __forceinline__ void async_commit() {
#ifdef FLASHDESK_CUDA_EMU
  fd_emu::async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int kPending>
__device__ __forceinline__ void async_wait() {
#ifdef FLASHDESK_CUDA_EMU
  fd_emu::async_wait(kPending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

}  // namespace flashdesk::cuda
