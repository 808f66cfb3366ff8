// Device helpers shared by the kernel files: warp and block reductions in a fixed order (so a
// kernel's result does not depend on scheduling), launch-size arithmetic, typed views of tensors.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/cuda_compat.cuh"
#include "engine/ops/cuda/device_numeric.cuh"
#include "engine/ops/tensor.h"

namespace flashdesk::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// Fully unrolled loops keep small per-thread arrays in registers (a run-time index or an early
// `break` sends them to local memory). The emulation's compiler has no such pragma.
#ifdef FLASHDESK_CUDA_EMU
#define FD_UNROLL
#define FD_UNROLL_BY(n)
#else
#define FD_UNROLL _Pragma("unroll")
// Unrolled n times (a loop of run-time length: more loads in flight).
#define FD_UNROLL_PRAGMA(x) _Pragma(#x)
#define FD_UNROLL_BY(n) FD_UNROLL_PRAGMA(unroll n)
#endif

// Butterfly sums and maxima over the 32 lanes: every lane ends with the same value, combined in
// the same order on every run.
// float, or double for sums that must come out correctly rounded once narrowed to FP32 (Engram's
// gate; docs/numerics.md "Engram"): any order of FP64 adds of a few hundred FP32 terms does.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 floats of shared memory; the call contains two barriers.
// RoPE of one interleaved pair (v[0], v[1]) at position pos (Backend::rope): rotated by angle
// pos * inv_freq, sign -1 the inverse, each result rounded to BF16. cos and sin of the FP32 angle
// evaluated in FP64 and rounded once: the correctly rounded values, which the CPU's libm cosf /
// sinf give all but very rarely. The device's sincosf may be 2 ulps off, and an ulp on a rotated
// value at a BF16 rounding boundary becomes a BF16 ulp, or a whole FP4 step in a compressed-KV
// entry.
// The angle's cosine and (signed) sine, and the rotation by them: rope_pair in two parts, so a
// kernel rotating every head's pair at one position evaluates the angle once.
__device__ __forceinline__ void rope_angle(int64_t pos, float inv_freq, float sign, float* c,
                                           float* s) {
  const float angle = static_cast<float>(pos) * inv_freq;
  const double angle_d = static_cast<double>(angle);
  *s = static_cast<float>(sin(angle_d)) * sign;
  *c = static_cast<float>(cos(angle_d));
}
__device__ __forceinline__ void rope_rotate(float* v, float c, float s) {
  const float a = v[0], b = v[1];
  v[0] = round_bf16(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
  v[1] = round_bf16(__fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
}
__device__ __forceinline__ void rope_pair(float* v, int64_t pos, float inv_freq, float sign) {
  float c, s;
  rope_angle(pos, inv_freq, sign, &c, &s);
  rope_rotate(v, c, s);
}

template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = 0;
  for (unsigned w = 0; w < warps; ++w) total += scratch[w];
  __syncthreads();
  return total;
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (unsigned w = 1; w < warps; ++w) m = fmaxf(m, scratch[w]);
  __syncthreads();
  return m;
}

// Whether the calling warp's block is the last of `arrivals` to count itself in at *count, which
// the last one sets back to zero for the next kernel (DeviceContext::arrival_counters). A whole
// warp calls it after its writes; when it returns true, what the others wrote before counting
// themselves in is visible to reads through L2 (__ldcg).
__device__ inline bool warp_arrives_last(unsigned* count, unsigned arrivals) {
  __threadfence();
  __syncwarp();
  unsigned last = 0;
  if ((threadIdx.x & 31u) == 0) {
    last = atomicAdd(count, 1u) == arrivals - 1u;
    if (last) *count = 0;
  }
  last = __shfl_sync(kFullMask, last, 0);
  if (last) __threadfence();
  return last != 0;
}

// A value and its index for arg-max reductions; i < 0: none yet.
struct Best {
  float v;
  int32_t i;
};

// The larger value, the lower index between equal ones: reduced over a row, its first maximum (as
// std::max_element and torch find it). Callers leave NaN out.
__device__ __forceinline__ Best better(Best a, Best b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

// The best over the warp; every lane gets it.
__device__ __forceinline__ Best warp_best(Best b) {
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(kFullMask, b.v, o), __shfl_xor_sync(kFullMask, b.i, o)};
    b = better(b, other);
  }
  return b;
}

// The best over the block (blockDim.x a multiple of 32); every thread gets it. `scratch` holds
// blockDim.x / 32 Best of shared memory; the call contains two barriers.
__device__ __forceinline__ Best block_best(Best b, Best* scratch) {
  b = warp_best(b);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  Best r{0.0f, -1};
  for (unsigned w = 0; w < blockDim.x / 32; ++w) r = better(r, scratch[w]);
  __syncthreads();
  return r;
}

// Exclusive prefix sum of v over the block (blockDim.x a multiple of 32); *total gets the sum.
// `warp_totals` holds blockDim.x / 32 ints of shared memory; the call contains three barriers.
// The first warp scans the warp totals with shuffles: every thread summing the totals of the
// warps before it cost a 1024-thread block ~160 instructions a warp per scan, and the indexer's
// selection runs ~100 scans a row (with its one-scan compaction: 180 -> 107 µs a decode row on
// the H200, docs/cuda-backend.md).
__device__ __forceinline__ int block_exclusive_scan(int v, int* warp_totals, int* total) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  int x = v;  // inclusive within the warp
  for (unsigned o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(kFullMask, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) warp_totals[warp] = x;
  __syncthreads();
  if (warp == 0) {  // warp_totals[w] becomes the inclusive sum of warps 0..w
    int t = lane < warps ? warp_totals[lane] : 0;
    for (unsigned o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(kFullMask, t, o);
      if (lane >= o) t += y;
    }
    if (lane < warps) warp_totals[lane] = t;
  }
  __syncthreads();
  const int before = warp > 0 ? warp_totals[warp - 1] : 0;
  *total = warp_totals[warps - 1];
  __syncthreads();
  return before + x - v;
}

// 16 bytes (16-byte aligned) of data read once, like a decode step's weights: through the
// non-coherent path without allocating in L1, with a 256-byte L2 prefetch. The emulation has no
// PTX: a plain load, which stops on a misaligned address as the device would.
__device__ __forceinline__ uint4 load_streaming(const void* p) {
#ifdef FLASHDESK_CUDA_EMU
  if ((reinterpret_cast<uintptr_t>(p) & 15u) != 0) fd_emu::misaligned_access(p, 16);
  uint4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
#else
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#endif
}

// A T-sized word at p, which must be a multiple of sizeof(T) apart from 0 (a misaligned vector
// load stops the device with error 716 and poisons its context): the emulation checks it, so
// the tests on the CPU catch what only the GPU would.
template <class T>
__device__ __forceinline__ T load_aligned(const void* p) {
#ifdef FLASHDESK_CUDA_EMU
  if ((reinterpret_cast<uintptr_t>(p) % sizeof(T)) != 0)
    fd_emu::misaligned_access(p, static_cast<int>(sizeof(T)));
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
#else
  return *reinterpret_cast<const T*>(p);
#endif
}

__device__ __forceinline__ int64_t lmin(int64_t a, int64_t b) {
  return a < b ? a : b;
}
__device__ __forceinline__ int64_t lmax(int64_t a, int64_t b) {
  return a > b ? a : b;
}

inline unsigned blocks_for(int64_t work, int64_t per_block) {
  return static_cast<unsigned>((work + per_block - 1) / per_block);
}

// The grid of the row kernels that take four columns a thread in 256-thread blocks and rows
// gridDim.y apart (up to 65,535 rows a launch's y): no 64-bit division for a thread's row.
inline dim3 four_column_grid(int64_t rows, int64_t cols) {
  return dim3(blocks_for((cols + 3) / 4, 256), static_cast<unsigned>(rows < 1       ? 1
                                                                     : rows < 65535 ? rows
                                                                                    : 65535));
}
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <class T>
T* ptr(const Tensor& t) {
  return reinterpret_cast<T*>(t.bytes());
}

}  // namespace flashdesk::cuda
