// A beside lane's join with slow writers (join_order_probe.h).
#include "engine/ops/cuda/join_order_probe.h"

#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int64_t kValues = int64_t{1} << 20;
constexpr unsigned kThreads = 256;

// out[i] = value; a slow writer's blocks first wait about 20 µs (on the device only: the
// emulation runs kernels one after another anyway). The early fd_allow_dependents (in the
// prologue) lets the next kernel launch while it waits, as the model's kernels do.
__global__ void join_probe_write_kernel(float* out, float value, int slow) {
  FD_GRID_PROLOGUE();
#ifdef __CUDA_ARCH__
  if (slow) {
    const long long start = clock64();
    while (clock64() - start < 40000) {
    }
  }
#else
  (void)slow;
#endif
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < kValues;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = value;
}

// c = a + b (b may be null: a copy).
__global__ void join_probe_add_kernel(const float* a, const float* b, float* c) {
  FD_GRID_PROLOGUE();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < kValues;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    c[i] = b ? a[i] + b[i] : a[i];
}

// c = a + b in one block, the constant `before` loaded before the wait (join_order_probe.h); it
// is zero, and added so that the load is not dropped.
__global__ void join_probe_add_one_block_kernel(const float* a, const float* b, const float* before,
                                                float* c) {
  fd_allow_dependents();
  const float z = before[threadIdx.x];
  fd_wait_prior_grid();
  for (int64_t i = threadIdx.x; i < kValues; i += blockDim.x) c[i] = a[i] + b[i] + z;
}

}  // namespace
}  // namespace cuda

int64_t join_order_probe_wrong_values(CudaBackend& be, JoinShape shape, bool graph, int rounds) {
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  Tensor a = ctx.scratch(DType::F32, Shape{cuda::kValues});
  Tensor b = ctx.scratch(DType::F32, Shape{cuda::kValues});
  Tensor copied = ctx.scratch(DType::F32, Shape{cuda::kValues});
  Tensor c = ctx.scratch(DType::F32, Shape{cuda::kValues});
  const dim3 grid(static_cast<unsigned>(ctx.multiprocessors()) * 4), block(cuda::kThreads);
  const auto write = [&](Tensor& t, float value, bool slow) {
    FD_LAUNCH(cuda::join_probe_write_kernel, grid, block, 0, ctx.stream(), cuda::ptr<float>(t),
              value, slow ? 1 : 0);
  };
  const auto add = [&](const Tensor& x, const Tensor* y, Tensor& out) {
    FD_LAUNCH(cuda::join_probe_add_kernel, grid, block, 0, ctx.stream(), cuda::ptr<const float>(x),
              y ? cuda::ptr<const float>(*y) : nullptr, cuda::ptr<float>(out));
  };
  Tensor zeros = ctx.scratch(DType::F32, Shape{cuda::kThreads});
  be.fill_zero(zeros);
  std::vector<float> host(static_cast<size_t>(cuda::kValues));
  int64_t wrong = 0;
  for (int r = 0; r < rounds; ++r) {
    for (Tensor* t : {&a, &b, &copied, &c}) be.fill_zero(*t);
    ctx.synchronize();
    const float va = static_cast<float>(r + 1), vb = static_cast<float>(2 * (r + 1));
    if (graph) ctx.step_begin();
    if (shape == JoinShape::SecondSectionSlowMain) {
      write(a, va, true);
      ctx.beside_begin();
      write(b, vb, false);
      const int64_t first = ctx.beside_end();
      ctx.beside_begin();
      add(a, nullptr, copied);
      const int64_t second = ctx.beside_end();
      ctx.join(first);
      ctx.join(second);
      add(copied, &b, c);
    } else if (shape == JoinShape::FirstSectionSlowMain) {
      write(a, va, true);
      ctx.beside_begin();
      add(a, nullptr, copied);
      const int64_t section = ctx.beside_end();
      write(b, vb, false);
      ctx.join(section);
      add(copied, &b, c);
    } else {
      // As the model's sections run: the lane's writer beside the main stream's, then the join.
      const bool slow_main = shape != JoinShape::JoinSlowLane;
      ctx.beside_begin();
      write(b, vb, !slow_main);
      const int64_t section = ctx.beside_end();
      write(a, va, slow_main);
      ctx.join(section);
      if (shape == JoinShape::JoinSlowMainOneBlockReader)
        FD_LAUNCH(cuda::join_probe_add_one_block_kernel, dim3(1), block, 0, ctx.stream(),
                  cuda::ptr<const float>(a), cuda::ptr<const float>(b),
                  cuda::ptr<const float>(zeros), cuda::ptr<float>(c));
      else
        add(a, &b, c);
    }
    if (graph) ctx.step_end();
    be.read(c, host.data(), c.nbytes());
    for (const float v : host) wrong += v != va + vb ? 1 : 0;
  }
  return wrong;
}

}  // namespace flashdesk
