// Kernel launches of the CUDA backend, in a form both nvcc and the CPU emulation of the `cuda-emu`
// preset (emu/cuda_emu.h) compile: FD_LAUNCH(kernel, grid, block, smem, stream, args...) is
// kernel<<<grid, block, smem, stream>>>(args...) followed by a check of the launch that names the
// kernel and the caller's file and line. Included by the kernel files (*.cu) only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <tuple>
#include <type_traits>

#ifdef FLASHDESK_CUDA_EMU
#include "engine/ops/cuda/emu/cuda_emu.h"
#else
#include <cuda_runtime.h>
#endif

#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/launch_overlap.h"
#include "engine/ops/cuda/no_padding.h"
#include "engine/ops/cuda/step_ops.h"

namespace flashdesk::cuda {
void count_kernel_launch(const char* name);  // device_context.h
}  // namespace flashdesk::cuda

// Programmatic dependent launch (sm_90+). A decode layer is 35-57 kernels of 3-50 µs, and each
// boundary cost the next grid's launch and ramp while the GPU idled. Every kernel launched with
// FD_LAUNCH may therefore start while its predecessor still runs, and must call
// fd_wait_prior_grid() before it reads anything an earlier kernel wrote or writes anything an
// earlier kernel may still read (pool memory is reused in stream order); the wait returns when
// the predecessor has completed and its writes are visible, and since every kernel waits before it
// completes, that covers all earlier kernels. Only immutable data (weights, kernel parameters) may
// be touched before it. fd_allow_dependents() lets the next kernel launch now (its blocks then
// wait in fd_wait_prior_grid). FD_GRID_PROLOGUE() does both first thing: what every kernel does
// unless it has weights to start loading before the wait. Elsewhere both are no-ops.
__device__ __forceinline__ void fd_allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void fd_wait_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#define FD_GRID_PROLOGUE() \
  do {                     \
    fd_allow_dependents(); \
    fd_wait_prior_grid();  \
  } while (0)

namespace flashdesk::cuda {

// One launch of `kernel` with its parameters (as the kernel takes them), checked.
template <class... Params>
void issue_kernel(const char* name, const char* file, int line, void (*kernel)(Params...),
                  dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  const std::tuple<std::decay_t<Params>...>& params) {
#ifdef FLASHDESK_CUDA_EMU
  (void)stream;
  // The parameters by value: a captured launch runs when its graph does.
  if (fd_emu::launch_shape_valid(grid, block))
    fd_emu::issue([=] { fd_emu::launch(grid, block, smem, [&] { std::apply(kernel, params); }); });
#else
  const bool after_wait = take_event_wait(stream);
  if (!after_wait && programmatic_launch_enabled()) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = 1;
    std::apply([&](const auto&... p) { (void)cudaLaunchKernelEx(&config, kernel, p...); }, params);
  } else {
    std::apply(
        [&](const auto&... p) {
          // clang-format off
          kernel<<<grid, block, smem, stream>>>(p...);
          // clang-format on
        },
        params);
  }
#endif
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    cuda_call_failed(static_cast<int>(e), cudaGetErrorName(e), cudaGetErrorString(e), name, file,
                     line);
}

// A kernel parameter's bytes are all values (no_padding.h): a step graph compares a launch's
// parameter bytes with the recorded launch's, and implicit padding holds whatever the host's
// stack held (the indexer's SelectForm stopped every replay of a model that way once).
template <class P>
constexpr bool kParameterBytesAreValues =
    !std::is_class_v<P> || std::has_unique_object_representations_v<P> || kNoPaddingDeclared<P>;

// A launch, offered first to the step open on `stream` (step_ops.h): a replayed step takes it (its
// graph runs the same launch), a captured one keeps a way to issue it again.
template <class... Params, class... Args>
void launch_kernel(const char* name, const char* file, int line, void (*kernel)(Params...),
                   dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  static_assert((kParameterBytesAreValues<std::decay_t<Params>> && ...),
                "a kernel parameter struct with implicit padding or undeclared floats: spell its "
                "padding out under FD_NO_PADDING_BEGIN (no_padding.h) and declare it");
  const std::tuple<std::decay_t<Params>...> params(static_cast<Params>(args)...);
  StepOffer offer = StepOffer::Issue;
  StepOpSink* sink = step_sink(stream);
  if (sink) {
    thread_local std::vector<unsigned char> bytes;
    StepOpKey key;
    key.kind = StepOpKind::Kernel;
    key.stream = stream;
    key.target = reinterpret_cast<const void*>(kernel);
    key.bytes = smem;
    key.grid = grid;
    key.block = block;
    key.params = parameter_bytes(params, bytes);
    key.name = name;
    offer = sink->offer(key);
  }
  count_kernel_launch(name);
  if (offer == StepOffer::Taken) return;
  issue_kernel(name, file, line, kernel, grid, block, smem, stream, params);
  if (offer == StepOffer::IssueAndKeep)
    sink->keep_reissue(
        [=] { issue_kernel(name, file, line, kernel, grid, block, smem, stream, params); });
}

// Lets Kernel take up to `bytes` of dynamic shared memory on the current device (past 48 KiB that
// needs an opt-in, which holds per kernel and device): set on the first launch that needs it and
// again only when a launch needs more, not on every call. The setting only grows (under a lock:
// backends on other threads may launch the same kernel), so no launch finds it lowered.
template <auto Kernel>
void allow_dynamic_smem(size_t bytes) {
  constexpr int kDevices = 64;
  static std::atomic<size_t> allowed[kDevices] = {};
  static std::mutex raising;
  int device = 0;
  FD_CUDA_CHECK(cudaGetDevice(&device));
  const bool known = device >= 0 && device < kDevices;
  if (known && allowed[device].load() >= bytes) return;
  std::lock_guard<std::mutex> lock(raising);
  const size_t want = known ? std::max(bytes, allowed[device].load()) : bytes;
  FD_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(want)));
  if (known) allowed[device].store(want);
}

}  // namespace flashdesk::cuda

#define FD_LAUNCH(kernel, grid, block, smem, stream, ...)                                          \
  ::flashdesk::cuda::launch_kernel(#kernel, __FILE__, __LINE__, kernel, grid, block, smem, stream, \
                                   __VA_ARGS__)

// Dynamic shared memory of the running kernel as `type* name` (16-byte aligned).
#ifdef FLASHDESK_CUDA_EMU
#define FD_DYNAMIC_SMEM(type, name) type* name = reinterpret_cast<type*>(::fd_emu::dynamic_smem())
#else
#define FD_DYNAMIC_SMEM(type, name)                                 \
  extern __shared__ __align__(16) unsigned char fd_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(fd_dynamic_smem_)
#endif
