// The optimised CPU backend's set-up and work splitting, and its row-wise ops (RMSNorm, RoPE,
// BF16 rounding) on the ISA's kernels.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "engine/ops/cpu_opt/cpu_opt_backend.h"

namespace flashdesk {

CpuOptimizedBackend::CpuOptimizedBackend(int threads, std::optional<CpuIsa> isa)
    : CpuReferenceBackend(threads), buffers_(BufferPool::create(kCachedBufferBytes)) {
  const CpuIsa chosen = isa ? *isa : choose_cpu_isa();
  if (!cpu_isa_supported(chosen))
    throw InvalidRequest("cpu-optimized: this CPU does not support " +
                         std::string(cpu_isa_name(chosen)));
  kernels_ = &cpu_opt::kernels_for(chosen);
  name_ = "cpu-optimized-" + std::string(cpu_isa_name(chosen));
}

Tensor CpuOptimizedBackend::alloc(DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(buffers_->allocate(bytes), 0, dtype, shape);
}

void CpuOptimizedBackend::parallel_units(int64_t units, int64_t work_per_unit,
                                         const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t min_chunk =
      std::max<int64_t>(1, kMinParallelWork / std::max<int64_t>(1, work_per_unit));
  pool().parallel_for(units, min_chunk, fn);
}

void CpuOptimizedBackend::add_linear_tasks(const cpu_opt::LinearJob& job, int64_t o_begin,
                                           int64_t o_end, std::vector<LinearTask>& tasks) {
  constexpr int64_t kRowsPerTask = 32;
  const int64_t row_tasks = (o_end - o_begin + kRowsPerTask - 1) / kRowsPerTask;
  // Few rows and many tokens (hc mixes, small heads): split the tokens too, so every thread
  // gets work. Each output still belongs to exactly one task.
  const int64_t want = 4 * pool().size();
  int64_t token_parts = 1;
  if (row_tasks < want && job.n >= 16)
    token_parts = std::min((want + row_tasks - 1) / row_tasks, job.n / 8);
  const int64_t tokens_per_part = (job.n + token_parts - 1) / token_parts;
  for (int64_t i = 0; i < job.n; i += tokens_per_part)
    for (int64_t o = o_begin; o < o_end; o += kRowsPerTask)
      tasks.push_back(
          {&job, o, std::min(o_end, o + kRowsPerTask), i, std::min(job.n, i + tokens_per_part)});
}

void CpuOptimizedBackend::run_linear_tasks(const std::vector<LinearTask>& tasks) {
  if (tasks.empty()) return;
  int64_t work = 0;
  for (const LinearTask& t : tasks)
    work += (t.o_end - t.o_begin) * (t.i_end - t.i_begin) * t.job->w->in;
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  const auto run = [&](int64_t t) {
    const LinearTask& task = tasks[static_cast<size_t>(t)];
    cpu_opt::LinearJob part = *task.job;
    part.x += task.i_begin * part.x_stride;
    part.y += task.i_begin * part.y_stride;
    part.n = task.i_end - task.i_begin;
    kernels_->linear_rows(part, task.o_begin, task.o_end);
  };
  // Threads claim tasks one at a time instead of taking a fixed share: on a busy machine a thread
  // that loses its core delays only the task it is on, the others finish the rest. Each output is
  // still computed by one task alone, so the bits do not depend on who ran it.
  std::atomic<int64_t> next{0};
  const int64_t threads = std::clamp<int64_t>(work / kMinParallelWork, 1, pool().size());
  pool().parallel_for(threads, 1, [&](int64_t, int64_t) {
    for (int64_t t = next.fetch_add(1, std::memory_order_relaxed); t < n_tasks;
         t = next.fetch_add(1, std::memory_order_relaxed))
      run(t);
  });
}

void CpuOptimizedBackend::rms_norm(const Tensor& x, const Tensor* weight, float eps, Tensor& y) {
  const int last = x.shape().rank() - 1;
  const int64_t d = x.dim(last), n = x.numel() / d;
  FD_CHECK(y.numel() == x.numel(), "rms_norm: output " + y.shape().str());
  if (weight) check_shape(*weight, Shape{d}, "rms_norm weight");
  const float* xd = x.data<float>();
  const float* w = weight ? weight->data<float>() : nullptr;
  float* yd = y.data<float>();
  parallel_units(n, 4 * d, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) kernels_->rms_norm_row(xd + i * d, w, eps, d, yd + i * d);
  });
}

void CpuOptimizedBackend::rope(Tensor& x, int64_t head_dim, std::span<const int64_t> positions,
                               std::span<const float> inv_freq, bool inverse) {
  const int64_t n = x.rows(), row = x.shape().row_numel();
  const int64_t pairs = static_cast<int64_t>(inv_freq.size()), rope_dim = 2 * pairs;
  FD_CHECK(row % head_dim == 0 && rope_dim <= head_dim, "rope: shape " + x.shape().str());
  FD_CHECK(static_cast<int64_t>(positions.size()) == n, "rope: one position per row");
  const int64_t heads = row / head_dim;
  float* xd = x.data<float>();
  parallel_units(n, heads * rope_dim + 8 * pairs, [&](int64_t begin, int64_t end) {
    std::vector<float> cs(inv_freq.size()), sn(inv_freq.size());
    for (int64_t i = begin; i < end; ++i) {
      // The reference's angles: FP32 product, FP32 cos / sin.
      const float pos = static_cast<float>(positions[static_cast<size_t>(i)]);
      for (size_t p = 0; p < inv_freq.size(); ++p) {
        const float angle = pos * inv_freq[p];
        cs[p] = std::cos(angle);
        sn[p] = inverse ? -std::sin(angle) : std::sin(angle);
      }
      for (int64_t h = 0; h < heads; ++h)
        kernels_->rope_pairs(xd + i * row + h * head_dim + (head_dim - rope_dim), cs.data(),
                             sn.data(), pairs);
    }
  });
}

void CpuOptimizedBackend::round_bf16(Tensor& x) {
  kernels_->round_bf16(x.data<float>(), x.numel());
}

}  // namespace flashdesk
