// The optimised CPU backend: the reference backend's interface and numerics (docs/numerics.md)
// with SIMD kernels chosen at run time (cpu_isa.h) and work split over a persistent thread pool.
//
// Goals: the hot ops of decode and prefill — quantised linears, MoE experts, sparse attention,
// indexer scoring, mHC mixes, RMSNorm, RoPE — fast on 2..N cores; every output computed by one
// thread in the reference's order, so results are the reference backend's bits, whatever the
// ISA, the thread count or the number of tokens in a step (docs/cpu-optimized.md). Non-goals: the
// cold ops (memory, embedding, cache quantisation, routing, Engram, compressor pooling) are
// inherited from the reference unchanged.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu_opt/buffer_pool.h"
#include "engine/ops/cpu_opt/cpu_isa.h"
#include "engine/ops/cpu_opt/opt_kernels.h"

namespace flashdesk {

class CpuOptimizedBackend : public CpuReferenceBackend {
 public:
  // threads <= 0: all hardware threads. isa: forced kernel set (must be supported); nullopt:
  // choose_cpu_isa() (CPUID, or FLASHDESK_CPU_ISA).
  explicit CpuOptimizedBackend(int threads = 0, std::optional<CpuIsa> isa = std::nullopt);
  std::string_view name() const override { return name_; }
  CpuIsa isa() const { return kernels_->isa; }

  // Host memory from a cache of freed buffers (buffer_pool.h); contents undefined.
  Tensor alloc(DType dtype, Shape shape) override;

  void linear(const Tensor& x, const LinearWeight& w, LinearMode mode, Tensor& y) override;
  void grouped_linear(const Tensor& x, const LinearWeight& w, int64_t groups, Tensor& y) override;
  void rms_norm(const Tensor& x, const Tensor* weight, float eps, Tensor& y) override;
  void rope(Tensor& x, int64_t head_dim, std::span<const int64_t> positions,
            std::span<const float> inv_freq, bool inverse) override;
  void round_bf16(Tensor& x) override;

  void hc_mixes(const Tensor& X, const HcParams& p, const HcSettings& s, Tensor& pre, Tensor& post,
                Tensor& comb) override;
  void hc_collapse(const Tensor& X, const Tensor& pre, Tensor& u) override;
  void hc_expand(const Tensor& X, const Tensor& y, const Tensor& post, const Tensor& comb,
                 Tensor& out) override;

  void indexer_select(const IndexerArgs& args, Tensor& topk, Tensor* candidates) override;
  void sparse_attention(const AttentionArgs& args, Tensor& out) override;

  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                   std::span<const ExpertWeights* const> experts, const ExpertWeights* shared,
                   float swiglu_limit, Tensor& y) override;

  // ---- shared by the op files (opt_*.cpp) ----
  const cpu_opt::Kernels& kernels() const { return *kernels_; }
  // fn(begin, end) over [0, units) on the pool, each part holding at least kMinParallelWork of
  // work (work_per_unit in multiply-adds), so small ops stay on the calling thread.
  void parallel_units(int64_t units, int64_t work_per_unit,
                      const std::function<void(int64_t, int64_t)>& fn);
  // A part of a linear job: weight rows [o_begin, o_end) for tokens [i_begin, i_end).
  struct LinearTask {
    const cpu_opt::LinearJob* job;
    int64_t o_begin, o_end, i_begin, i_end;
  };
  // Appends the tasks of a job's rows [o_begin, o_end): 32-row parts, and token parts too when
  // rows are too few to keep every thread busy.
  void add_linear_tasks(const cpu_opt::LinearJob& job, int64_t o_begin, int64_t o_end,
                        std::vector<LinearTask>& tasks);
  // Runs tasks (of one or many jobs) on the pool; returns when all are done.
  void run_linear_tasks(const std::vector<LinearTask>& tasks);

  static constexpr int64_t kMinParallelWork = 1 << 16;

  // Freed activation buffers kept for reuse, at most this many bytes.
  static constexpr size_t kCachedBufferBytes = size_t{512} << 20;

 private:
  std::shared_ptr<BufferPool> buffers_;
  const cpu_opt::Kernels* kernels_;
  std::string name_;
};

}  // namespace flashdesk
