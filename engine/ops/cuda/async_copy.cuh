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

// 16 bytes to shared dst (16-byte aligned) from global src (16-byte aligned). Bypasses L1 (the
// weights are read once a step).
__device__ __forceinline__ void async_copy16(void* dst, const void* src) {
#ifdef FLASHDESK_CUDA_EMU
  fd_emu::async_copy16(dst, src, 16);
#else
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#endif
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
