// The V4.1 indexer on the CPU reference backend (docs/model-spec.md §3.6): ReLU-weighted head
// scores against FP4 index keys in the official BF16 arithmetic, candidate blocks of the
// candidate source, top-k by score (ties broken as torch's CPU topk does) published in position
// order with -1 for entries not yet visible.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

// Entry-level mask of a row's candidate blocks (-1 = none).
std::vector<uint8_t> candidate_mask(const int32_t* blocks, int64_t n_blocks, int64_t block_size,
                                    int64_t n_entries) {
  std::vector<uint8_t> mask(static_cast<size_t>(n_entries), 0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (blocks[b] < 0) continue;
    const int64_t first = blocks[b] * block_size;
    for (int64_t s = first; s < std::min(first + block_size, n_entries); ++s) mask[s] = 1;
  }
  return mask;
}

}  // namespace

void CpuReferenceBackend::indexer_select(const IndexerArgs& a, Tensor& topk, Tensor* candidates) {
  const Tensor& q = *a.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2), E = a.keys.n_entries;
  check_indexer_args(a, topk);
  const int64_t width = std::max(E, a.select_width);  // the row the top-k is taken over
  const int64_t k_cols = topk.dim(1), row_bytes = kv_row_bytes(KvFormat::Fp4Key, d);
  pool_->parallel_for(
      n, cpu::rows_per_task(std::max<int64_t>(E, 1) * heads * d), [&](int64_t begin, int64_t end) {
        std::vector<float> score(static_cast<size_t>(width)), key(static_cast<size_t>(d));
        for (int64_t t = begin; t < end; ++t) {
          const int64_t visible = std::min(a.n_visible[static_cast<size_t>(t)], E);
          std::vector<uint8_t> allowed;
          if (a.restrict_blocks) {
            const int64_t c = a.restrict_blocks->dim(1);
            allowed =
                candidate_mask(a.restrict_blocks->data<int32_t>() + t * c, c, a.block_size, width);
          }
          const float* qt = q.data<float>() + t * heads * d;
          const float* wt = a.weights->data<float>() + t * heads;
          std::fill(score.begin(), score.end(), kNegInf);
          for (int64_t s = 0; s < visible; ++s) {
            if (!allowed.empty() && !allowed[s]) continue;
            const uint8_t* row = a.keys.rows->bytes() + s * row_bytes;
            cpu::dequantize_kv_row(KvFormat::Fp4Key, row, d, key.data());
            float acc = 0.0f;
            for (int64_t h = 0; h < heads; ++h)
              acc += cpu::index_head_term(cpu::dot(qt + h * d, key.data(), d), wt[h]);
            score[s] = flashdesk::round_bf16(acc);
          }
          cpu::select_best(
              score, a.n_visible[static_cast<size_t>(t)], false,
              std::span<int32_t>(topk.data<int32_t>() + t * k_cols, static_cast<size_t>(k_cols)));
          if (!candidates) continue;
          const int64_t bs = a.block_size, n_blocks = (width + bs - 1) / bs,
                        c_cols = candidates->dim(1);
          std::vector<float> block_score(static_cast<size_t>(n_blocks), kNegInf);
          for (int64_t s = 0; s < width; ++s)
            block_score[s / bs] = std::max(block_score[s / bs], score[s]);
          if (visible >= 1) block_score[(visible - 1) / bs] = kPosInf;
          cpu::select_best(block_score, n_blocks, true,
                           std::span<int32_t>(candidates->data<int32_t>() + t * c_cols,
                                              static_cast<size_t>(c_cols)));
        }
      });
}

}  // namespace flashdesk
