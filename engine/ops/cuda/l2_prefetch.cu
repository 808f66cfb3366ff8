// Weights prefetched into L2 ahead of the kernels that stream them (Backend::prefetch_weights).
// A decode layer at batch 1 spends about 75 of its 240 µs in kernels that leave the memory bus
// idle: the attention's chain, norms, RoPE, the router (docs/cuda-backend.md, the thirty-fourth
// session's timeline). A prefetch issued before such a stretch moves the next big weights (wo_a
// during the attention, the shared expert during the gate and the router, wq_b during wq_a) into
// L2 then, so that their GEMVs read part of their bytes from L2. The copy engine's bulk prefetch
// (`cp.async.bulk.prefetch.L2`, sm_90) takes a whole range an instruction: one small grid issues
// them and exits, and nothing waits for the bytes.
#include <algorithm>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/linear.cuh"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kMaxSpans = 8;
constexpr int64_t kChunkBytes = 16 << 10;  // one prefetch instruction's range
constexpr unsigned kThreads = 128;
constexpr unsigned kMaxBlocks = 8;

struct PrefetchSpans {
  const uint8_t* begin[kMaxSpans];
  int64_t bytes[kMaxSpans];  // multiples of 16, from 16-byte aligned beginnings
  int32_t count;
  int32_t evict_last;
};

// Thread i of the grid takes chunks i, i + threads, ... of the spans laid end to end.
__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(PrefetchSpans s) {
  fd_allow_dependents();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint64_t policy = 0;
  if (s.evict_last)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t chunk = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t first_chunk = 0;  // of span i
  for (int i = 0; i < s.count; ++i) {
    const int64_t chunks = (s.bytes[i] + kChunkBytes - 1) / kChunkBytes;
    for (; chunk < first_chunk + chunks; chunk += threads) {
      const int64_t offset = (chunk - first_chunk) * kChunkBytes;
      const uint8_t* p = s.begin[i] + offset;
      const int64_t left = s.bytes[i] - offset;
      const uint32_t n = static_cast<uint32_t>(left < kChunkBytes ? left : kChunkBytes);
      if (s.evict_last)
        asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p),
                     "r"(n), "l"(policy)
                     : "memory");
      else
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(n) : "memory");
    }
    first_chunk += chunks;
  }
#else
  (void)s;
#endif
  // Every kernel waits for its predecessor before it completes (cuda_compat.cuh); the weights
  // were never written by one, so the prefetches went out before.
  fd_wait_prior_grid();
}

}  // namespace
}  // namespace cuda

void CudaBackend::prefetch_weights(std::span<const LinearWeight* const> weights, int64_t rows) {
  if (l2_prefetch_ == L2Prefetch::Off || rows > cuda::kGemvTokens) return;
  cuda::DeviceGuard g(ctx_->device());
  // At most three quarters of L2, the first weights first: more would evict what came before.
  const int64_t cap = static_cast<int64_t>(ctx_->props().l2CacheSize) / 4 * 3;
  int64_t budget = cap;
  cuda::PrefetchSpans s{};
  for (const LinearWeight* w : weights) {
    for (const Tensor* t : {&w->data, &w->scale}) {
      if (!t->defined() || t->host_accessible() || s.count == cuda::kMaxSpans) continue;
      const uint8_t* p = t->bytes();
      const uintptr_t skip = (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16;
      const int64_t bytes = std::min<int64_t>(
          (static_cast<int64_t>(t->nbytes()) - static_cast<int64_t>(skip)) / 16 * 16, budget);
      if (bytes <= 0) continue;
      s.begin[s.count] = p + skip;
      s.bytes[s.count] = bytes;
      ++s.count;
      budget -= bytes;
    }
  }
  if (s.count == 0) return;
  s.evict_last = l2_prefetch_ == L2Prefetch::EvictLast ? 1 : 0;
  const int64_t chunks = (cap - budget + cuda::kChunkBytes - 1) / cuda::kChunkBytes;
  const unsigned blocks = static_cast<unsigned>(
      std::clamp<int64_t>((chunks + cuda::kThreads - 1) / cuda::kThreads, 1, cuda::kMaxBlocks));
  FD_LAUNCH(cuda::l2_prefetch_kernel, dim3(blocks), dim3(cuda::kThreads), 0, ctx_->stream(), s);
  ++l2_prefetch_launches_;
}

}  // namespace flashdesk
