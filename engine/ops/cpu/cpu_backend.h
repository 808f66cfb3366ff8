// The CPU reference backend: a plain scalar implementation of every op of backend.h, the
// definition the optimised CPU and CUDA backends are tested against. Loops run over output rows
// on a small thread pool (each output computed by one thread in a fixed order, so results do
// not depend on the thread count); weights are dequantised row by row on the fly.
#pragma once

#include <memory>

#include "engine/ops/backend.h"
#include "engine/ops/cpu/thread_pool.h"

namespace flashdesk {

class CpuReferenceBackend : public Backend {
 public:
  // threads <= 0: std::thread::hardware_concurrency().
  explicit CpuReferenceBackend(int threads = 0);
  std::string_view name() const override { return "cpu-reference"; }
  ThreadPool& pool() { return *pool_; }

  Tensor alloc(DType dtype, Shape shape) override;
  void fill_zero(Tensor& t) override;
  void write(Tensor& dst, const void* src, size_t bytes) override;
  void read(const Tensor& src, void* dst, size_t bytes) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) override;
  void scatter_rows(const Tensor& src, std::span<const int64_t> src_rows, Tensor& dst,
                    std::span<const int64_t> dst_rows) override;
  Tensor upload(const TensorView& t) override;
  Tensor upload_f32(const TensorView& t) override;

  void linear(const Tensor& x, const LinearWeight& w, LinearMode mode, Tensor& y) override;
  void grouped_linear(const Tensor& x, const LinearWeight& w, int64_t groups, Tensor& y) override;
  void rms_norm(const Tensor& x, const Tensor* weight, float eps, Tensor& y) override;
  void rope(Tensor& x, int64_t head_dim, std::span<const int64_t> positions,
            std::span<const float> inv_freq, bool inverse) override;
  void scale(Tensor& x, float factor) override;
  void round_bf16(Tensor& x) override;
  void fake_quant_fp4_e8m0(Tensor& x, int64_t block) override;

  void embed_rows(const Tensor& table, const Tensor& ids, Tensor& rows) override;
  void add_argmax(Tensor& x, const Tensor& bias, Tensor& ids) override;
  void concat_columns(const Tensor& left, const Tensor& right, Tensor& out) override;

  void embed(const Tensor& table, std::span<const int32_t> ids, Tensor& rows, Tensor& X) override;
  void hc_mixes(const Tensor& X, const HcParams& p, const HcSettings& s, Tensor& pre, Tensor& post,
                Tensor& comb) override;
  void hc_collapse(const Tensor& X, const Tensor& pre, Tensor& u) override;
  void hc_expand(const Tensor& X, const Tensor& y, const Tensor& post, const Tensor& comb,
                 Tensor& out) override;

  void quantize_rows(KvFormat format, const Tensor& x, Tensor& dst, int64_t first_row) override;
  void dequantize_rows(KvFormat format, const Tensor& src, int64_t first_row, Tensor& out) override;
  void compressor_pool(const Tensor& kv, const Tensor& score, int64_t ratio, Tensor& pending_kv,
                       Tensor& pending_score, int64_t& n_pending, Tensor& out) override;

  void indexer_select(const IndexerArgs& args, Tensor& topk, Tensor* candidates) override;
  void sparse_attention(const AttentionArgs& args, Tensor& out) override;

  void moe_route(const Tensor& logits, const Tensor& bias, const Tensor* bias_image,
                 std::span<const uint8_t> image_rows, const RouteSettings& s, Tensor& ids,
                 Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                   std::span<const ExpertWeights* const> experts, const ExpertWeights* shared,
                   float swiglu_limit, Tensor& y) override;

  void engram_gather(const QuantTable& table, std::span<const int64_t> ids, Tensor& e) override;
  void engram_update(Tensor& X, const Tensor& kv, const Tensor& q_weight, const Tensor& k_weight,
                     std::span<const uint8_t> masked_rows, float eps) override;

 private:
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace flashdesk
