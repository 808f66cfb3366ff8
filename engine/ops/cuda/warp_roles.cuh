// Warps with roles of their own inside one block (a producer warpgroup feeding consumer
// warpgroups, attention_wgmma_sm90a.cu): named barriers, which only the threads of the roles
// concerned reach (__syncthreads waits for every thread of the block), and Hopper's register
// reallocation between warpgroups (a producer that mostly copies gives registers to consumers
// that hold accumulators).
#pragma once

#include "engine/ops/cuda/cuda_compat.cuh"

namespace flashdesk::cuda {

// Waits at barrier `id` (1-15; 0 is __syncthreads') until `count` threads (a multiple of 32) have
// reached or arrived at it. Shared memory written before the barrier by any of them is visible
// after it.
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned count) {
#ifdef FLASHDESK_CUDA_EMU
  fd_emu::named_barrier(id, count, true);
#else
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#endif
}

// Counts this thread at barrier `id` without waiting for it (the producer's "full" signal, the
// consumers' "free" one).
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned count) {
#ifdef FLASHDESK_CUDA_EMU
  fd_emu::named_barrier(id, count, false);
#else
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#endif
}

// The warpgroup's registers a thread raised to / lowered to kRegisters (a multiple of 8 from 24
// to 256; sm_90a only, a no-op elsewhere): every warp of the warpgroup calls it.
template <int kRegisters>
__device__ __forceinline__ void raise_registers() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(FLASHDESK_CUDA_EMU)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}
template <int kRegisters>
__device__ __forceinline__ void lower_registers() {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(FLASHDESK_CUDA_EMU)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

}  // namespace flashdesk::cuda
