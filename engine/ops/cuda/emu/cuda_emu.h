// A CPU emulation of the small part of CUDA that the kernels of engine/ops/cuda use, so that the
// same kernel source runs on a machine without a GPU (the `cuda-emu` preset): every block runs its
// threads as cooperative fibers on the calling thread, so barriers, warp shuffles and shared memory
// behave as on the device, deterministically.
//
// Goals: catch indexing, synchronisation and numerics mistakes of the kernels in CI-like runs
// without a GPU, against the same tests as the real device. Non-goals: speed, concurrency between
// blocks (blocks run one after another), memory-model races, anything the kernels do not use
// (textures, inline PTX, cooperative groups); kernels that need those must not be compiled here.
// The one tensor-core product the kernels use (mma.cuh) is emulated with its fragment layout, its
// sums in k order. Included only through engine/ops/cuda/cuda_compat.cuh.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

// ---- qualifiers -----------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Shared memory: one copy per kernel, valid because blocks run one at a time.
#define __shared__ static
#define __constant__ static

// ---- vector types -----------------------------------------------------------------------------
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};

// ---- runtime API subset -----------------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
constexpr unsigned cudaStreamNonBlocking = 1;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int multiProcessorCount;
  int major;
  int minor;
  int l2CacheSize;
  int maxThreadsPerBlock;
};

const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaDriverGetVersion(int* v);
cudaError_t cudaRuntimeGetVersion(int* v);
cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, size_t bytes);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s = nullptr);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s = nullptr);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// Graphs (step_graph.h): while a stream is captured, the work issued (launches, asynchronous copies
// and fills) is kept, not run, and runs when a graph made from it is launched, as on the device:
// a copy reads its source then. Updating an executable graph takes the new graph's work where the
// node counts agree (the emulation's stand-in for the same topology).
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
using cudaGraphNode_t = CUgraphNode_st*;
struct cudaGraphExecUpdateResultInfo {
  int result;
  cudaGraphNode_t errorNode;
  cudaGraphNode_t errorFromNode;
};
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo* info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

template <class F>
cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) {
  return cudaSuccess;
}

// ---- the emulated threads ----------------------------------------------------------------------
namespace fd_emu {

// An asynchronous copy (cp.async) not yet landed: its source bytes (4, 8 or 16), read at issue
// (the sources are not written while the copy is in flight), written to dst when a wait retires
// its group.
struct PendingCopy {
  void* dst;
  unsigned char bytes[16];
  int size = 16;
};

struct ThreadContext {
  dim3 thread_idx, block_idx, block_dim, grid_dim;
  unsigned lane = 0, warp = 0;
  std::vector<PendingCopy> open_copies;               // since the last commit
  std::vector<std::vector<PendingCopy>> copy_groups;  // committed, oldest first
};

// The fiber running now (only valid inside a kernel).
ThreadContext& ctx();
void block_barrier();
void warp_barrier();
// A named barrier of the block (bar.sync / bar.arrive with an id of 1..15): released once `count`
// threads have reached it, counting those that only arrive (wait false), which go on at once.
void named_barrier(unsigned id, unsigned count, bool wait);
// Lane `src` of the calling warp's values after every lane wrote `value` (all lanes take part).
uint64_t warp_exchange(uint64_t value, unsigned src);
// The warp-wide m16n8k16 BF16 tensor-core product with FP32 accumulation (engine/ops/cuda/mma.cuh
// documents the fragments): d += A * B, every lane passing its own fragments, as mma.sync does.
// The products are exact in FP32; they are added to d in k order (the device's order differs
// only in FP32 rounding).
void mma_bf16_16816(float* d, const uint32_t* a, const uint32_t* b);
// cp.async of `bytes` (4, 8 or 16) bytes, dst and src aligned to them, committed in groups and
// landed only by async_wait: shared memory keeps its old bytes until then (on the device they may
// land any time before the wait), so a read before the wait, or another lane's read before a warp
// barrier, shows stale data here.
void async_copy(void* dst, const void* src, int bytes);
void async_commit();
// Lands every committed group of the calling thread but the `pending` most recent ones.
void async_wait(int pending);
// The m16n8k16 FP16 product with FP32 accumulation, as mma_bf16_16816.
void mma_f16_16816(float* d, const uint32_t* a, const uint32_t* b);
// Dynamic shared memory of the running block (the launch's byte count, 16-byte aligned).
unsigned char* dynamic_smem();
// A vector access of `bytes` at an address not a multiple of them: the device stops with a
// misaligned-address error; the emulation reports the thread and aborts.
[[noreturn]] void misaligned_access(const void* address, int bytes);
// Runs body once per thread of every block; blocks one after another.
void launch(dim3 grid, dim3 block, size_t dynamic_smem_bytes, const std::function<void()>& body);
// Whether a launch of this shape would start (else the launch error is set, as the device reports
// a bad configuration when the launch is issued, captured or not).
bool launch_shape_valid(dim3 grid, dim3 block);
// Runs `work` now, or, while a stream is captured, keeps it for the graph being captured.
void issue(std::function<void()> work);

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8);
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

}  // namespace fd_emu

#define threadIdx (::fd_emu::ctx().thread_idx)
#define blockIdx (::fd_emu::ctx().block_idx)
#define blockDim (::fd_emu::ctx().block_dim)
#define gridDim (::fd_emu::ctx().grid_dim)
constexpr int warpSize = 32;

inline void __syncthreads() {
  fd_emu::block_barrier();
}
// The block's OR of `pred`, as a barrier. One block runs at a time on its host thread, so one
// flag per host thread serves: set between the first two barriers, read before the third, cleared
// by the block's first thread after it.
inline int __syncthreads_or(int pred) {
  static thread_local int any = 0;
  fd_emu::block_barrier();
  if (pred) any = 1;
  fd_emu::block_barrier();
  const int result = any;
  fd_emu::block_barrier();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) any = 0;
  return result;
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  fd_emu::warp_barrier();
}
inline void __threadfence() {}

template <class T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
  const unsigned lane = fd_emu::ctx().lane;
  const unsigned base = lane & ~static_cast<unsigned>(width - 1);
  return fd_emu::from_bits<T>(
      fd_emu::warp_exchange(fd_emu::to_bits(v), base + (static_cast<unsigned>(src) % width)));
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  const unsigned lane = fd_emu::ctx().lane;
  unsigned src = lane ^ static_cast<unsigned>(mask);
  if ((src & ~static_cast<unsigned>(width - 1)) != (lane & ~static_cast<unsigned>(width - 1)))
    src = lane;
  return fd_emu::from_bits<T>(fd_emu::warp_exchange(fd_emu::to_bits(v), src));
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  const unsigned lane = fd_emu::ctx().lane;
  const unsigned in_seg = lane % static_cast<unsigned>(width);
  const unsigned src = in_seg + delta < static_cast<unsigned>(width) ? lane + delta : lane;
  return fd_emu::from_bits<T>(fd_emu::warp_exchange(fd_emu::to_bits(v), src));
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  const unsigned lane = fd_emu::ctx().lane;
  const unsigned in_seg = lane % static_cast<unsigned>(width);
  const unsigned src = in_seg >= delta ? lane - delta : lane;
  return fd_emu::from_bits<T>(fd_emu::warp_exchange(fd_emu::to_bits(v), src));
}
inline unsigned __ballot_sync(unsigned, int pred) {
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l)
    bits |= static_cast<unsigned>(fd_emu::warp_exchange(pred ? 1u : 0u, l)) << l;
  return bits;
}

// The lanes whose `value` equals this lane's (every lane of the warp takes part).
inline unsigned __match_any_sync(unsigned, unsigned value) {
  unsigned same = 0;
  for (unsigned l = 0; l < 32; ++l)
    same |= (fd_emu::warp_exchange(value, l) == value ? 1u : 0u) << l;
  return same;
}
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
// Leading zero bits of x (32 for 0, as the device's).
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}

// Blocks run one at a time and threads never preempt each other: plain read-modify-writes.
template <class T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T>
T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, 4);
  return i;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
// Rounded-as-written arithmetic (no fused multiply-add), which the host gives anyway.
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fsub_rn(float a, float b) {
  return a - b;
}
inline double __dmul_rn(double a, double b) {
  return a * b;
}
inline double __dadd_rn(double a, double b) {
  return a + b;
}
inline double __dsub_rn(double a, double b) {
  return a - b;
}
inline float __double2float_rn(double a) {
  return static_cast<float>(a);
}
inline void sincosf(float a, float* s, float* c) {
  *s = std::sin(a);
  *c = std::cos(a);
}
template <class T>
T __ldcg(const T* p) {
  return *p;
}
template <class T>
void __stcg(T* p, T v) {
  *p = v;
}
// prmt.b32 as CUDA's __byte_perm: byte i of the result is byte (s >> 4i) & 7 of {y, x}.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t both = (static_cast<uint64_t>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<unsigned>((both >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
  return r;
}
template <class T>
T __ldg(const T* p) {
  return *p;
}
