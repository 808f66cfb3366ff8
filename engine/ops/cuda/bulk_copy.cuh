// Bulk copies into shared memory (cp.async.bulk, sm_90 and later) and the transaction barriers
// they complete (mbarrier): one lane puts kilobytes in flight with one instruction, and the copy
// engine lands them without the warp holding a register or issuing another load, so a consumer
// keeps several pieces in flight while it computes on an earlier one (gemv_bulk.cu). A barrier
// counts one arrival (the issuing lane's, which also announces the bytes to expect) and the bytes
// landed; a wait on phase parity p returns once the phase p has completed. The emulation
// (emu/cuda_emu.h) lands a copy when it is issued, so a wait there has nothing to wait for; the
// order the kernel keeps (a slot refilled only after every lane's reads of it) is checked there all
// the same, since a refill too early overwrites the bytes a later lane still reads.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/ops/cuda/cuda_compat.cuh"

namespace flashdesk::cuda {

// Whether this compilation's device code has the bulk copies (sm_90 on; the emulation too).
#if defined(FLASHDESK_CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define FD_HAVE_BULK_COPY 1
#else
#define FD_HAVE_BULK_COPY 0
#endif

#if FD_HAVE_BULK_COPY
__device__ __forceinline__ unsigned shared_address(const void* p) {
#ifdef FLASHDESK_CUDA_EMU
  return static_cast<unsigned>(reinterpret_cast<uintptr_t>(p));
#else
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
#endif
}

// A barrier of one arrival, visible to the copy engine once the caller's fence has run.
__device__ __forceinline__ void barrier_init(uint64_t* bar) {
#ifdef FLASHDESK_CUDA_EMU
  *bar = 0;
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(bar)) : "memory");
#endif
}

// After barrier_init, before any copy completes on those barriers.
__device__ __forceinline__ void barrier_init_fence() {
#ifndef FLASHDESK_CUDA_EMU
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// The issuing lane's arrival, announcing `bytes` to land before the phase completes.
__device__ __forceinline__ void barrier_expect(uint64_t* bar, uint32_t bytes) {
#ifdef FLASHDESK_CUDA_EMU
  (void)bar;
  (void)bytes;
#else
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)),
      "r"(bytes)
      : "memory");
#endif
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global src to shared dst,
// completing on `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
#ifdef FLASHDESK_CUDA_EMU
  (void)bar;
  if ((reinterpret_cast<uintptr_t>(src) & 15u) != 0) fd_emu::misaligned_access(src, 16);
  if ((reinterpret_cast<uintptr_t>(dst) & 15u) != 0) fd_emu::misaligned_access(dst, 16);
  std::memcpy(dst, src, bytes);
#else
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(bar))
      : "memory");
#endif
}

// Returns once phase `parity` (0 or 1) of the barrier has completed.
__device__ __forceinline__ void barrier_wait(uint64_t* bar, uint32_t parity) {
#ifdef FLASHDESK_CUDA_EMU
  (void)bar;
  (void)parity;
#else
  asm volatile(
      "{\n"
      "  .reg .pred done;\n"
      "wait_%=:\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "  @!done bra wait_%=;\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
#endif
}
#endif  // FD_HAVE_BULK_COPY

}  // namespace flashdesk::cuda
