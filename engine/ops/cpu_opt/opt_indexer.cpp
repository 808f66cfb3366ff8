// The V4.1 indexer on the optimised CPU backend: for a block of queries, the head dot products
// against a unit of index keys run as one FP32 GEMM ([queries * heads, d] x [keys, d]^T) on the
// ISA's linear kernel, each unit of keys decoded once per query block; the ReLU-weighted head
// sum and the selection (top-k, candidate blocks) are the reference's, in the reference's order.
// FP4 x FP4 head dots are exact sums in practice, so scores (and top-k ids) usually match the
// reference bit for bit.
#include <algorithm>
#include <limits>
#include <vector>

#include "engine/ops/cpu/kernels.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"

namespace flashdesk {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr int64_t kKeysPerUnit = 64;

// Scores outside the row's candidate blocks (-1 = none) set to -inf.
void apply_restriction(const int32_t* blocks, int64_t n_blocks, int64_t block_size,
                       std::vector<float>& score) {
  const int64_t n_entries = static_cast<int64_t>(score.size());
  std::vector<uint8_t> allowed(score.size(), 0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (blocks[b] < 0) continue;
    const int64_t first = blocks[b] * block_size;
    for (int64_t s = first; s < std::min(first + block_size, n_entries); ++s) allowed[s] = 1;
  }
  for (int64_t s = 0; s < n_entries; ++s)
    if (!allowed[s]) score[s] = kNegInf;
}

void select_candidates(const std::vector<float>& score, int64_t visible, int64_t bs,
                       std::span<int32_t> out) {
  const int64_t E = static_cast<int64_t>(score.size()), n_blocks = (E + bs - 1) / bs;
  std::vector<float> block_score(static_cast<size_t>(n_blocks), kNegInf);
  for (int64_t s = 0; s < E; ++s) block_score[s / bs] = std::max(block_score[s / bs], score[s]);
  if (visible >= 1) block_score[(visible - 1) / bs] = kPosInf;
  cpu::select_best(block_score, n_blocks, true, out);
}

}  // namespace

void CpuOptimizedBackend::indexer_select(const IndexerArgs& a, Tensor& topk, Tensor* candidates) {
  const Tensor& q = *a.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2), E = a.keys.n_entries;
  check_indexer_args(a, topk);
  if (n == 0) return;
  const int64_t k_cols = topk.dim(1), row_bytes = kv_row_bytes(KvFormat::Fp4Key, d);
  const int64_t width = std::max(E, a.select_width);  // the row the top-k is taken over
  // Queries per block: enough GEMM rows to reuse each decoded key, scores bounded in memory.
  const int64_t block = std::clamp<int64_t>(
      std::min(128 / std::max<int64_t>(1, heads), (int64_t{1} << 24) / std::max<int64_t>(1, E)), 1,
      n);
  std::vector<float> scores(static_cast<size_t>(block * E));
  for (int64_t t0 = 0; t0 < n; t0 += block) {
    const int64_t nb = std::min(block, n - t0);
    int64_t vmax = 0;
    for (int64_t t = t0; t < t0 + nb; ++t)
      vmax = std::max(vmax, std::min(a.n_visible[static_cast<size_t>(t)], E));
    std::fill(scores.begin(), scores.end(), kNegInf);
    const int64_t units = (vmax + kKeysPerUnit - 1) / kKeysPerUnit;
    parallel_units(units, kKeysPerUnit * nb * heads * d, [&](int64_t begin, int64_t end) {
      Tensor keys = alloc(DType::F32, Shape{kKeysPerUnit, d});
      std::vector<float> dots(static_cast<size_t>(nb * heads * kKeysPerUnit));
      const LinearWeight kw{WeightFormat::F32, kKeysPerUnit, d, 32, keys, Tensor(), "index keys"};
      const cpu_opt::LinearJob job{
          q.data<float>() + t0 * heads * d, nb * heads, d, &kw, dots.data(), kKeysPerUnit, false};
      for (int64_t u = begin; u < end; ++u) {
        const int64_t s0 = u * kKeysPerUnit, m = std::min(kKeysPerUnit, vmax - s0);
        for (int64_t s = 0; s < m; ++s)
          kernels().dequantize_kv_row(KvFormat::Fp4Key, a.keys.rows->bytes() + (s0 + s) * row_bytes,
                                      d, keys.data<float>() + s * d);
        kernels().linear_rows(job, 0, m);
        for (int64_t i = 0; i < nb; ++i)
          kernels().relu_weighted_sum(&dots[i * heads * kKeysPerUnit], kKeysPerUnit,
                                      a.weights->data<float>() + (t0 + i) * heads, heads, m,
                                      &scores[i * E + s0]);
      }
    });
    parallel_units(nb, 4 * width, [&](int64_t begin, int64_t end) {
      std::vector<float> score(static_cast<size_t>(width));
      for (int64_t i = begin; i < end; ++i) {
        const int64_t t = t0 + i;
        const int64_t visible = std::clamp<int64_t>(a.n_visible[static_cast<size_t>(t)], 0, E);
        std::copy(&scores[i * E], &scores[i * E] + E, score.begin());
        std::fill(score.begin() + visible, score.end(), kNegInf);
        if (a.restrict_blocks) {
          const int64_t c = a.restrict_blocks->dim(1);
          apply_restriction(a.restrict_blocks->data<int32_t>() + t * c, c, a.block_size, score);
        }
        cpu::select_best(
            score, a.n_visible[static_cast<size_t>(t)], false,
            std::span<int32_t>(topk.data<int32_t>() + t * k_cols, static_cast<size_t>(k_cols)));
        if (candidates)
          select_candidates(score, visible, a.block_size,
                            std::span<int32_t>(candidates->data<int32_t>() + t * candidates->dim(1),
                                               static_cast<size_t>(candidates->dim(1))));
      }
    });
  }
}

}  // namespace flashdesk
