// Scalar helpers that both CPU backends run as they are: Sinkhorn on the tiny hc x hc mHC
// matrices and the top-k selection of the indexer (neither has a faster form worth keeping).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/ops/cpu/kernels.h"
#include "engine/util/torch_topk.h"

namespace flashdesk::cpu {

void sinkhorn(float* c, int64_t hc, int64_t iters, float eps) {
  for (int64_t j = 0; j < hc; ++j) {  // row softmax + eps
    float* row = c + j * hc;
    const float mx = *std::max_element(row, row + hc);
    float sum = 0.0f;
    for (int64_t k = 0; k < hc; ++k) sum += (row[k] = std::exp(row[k] - mx));
    for (int64_t k = 0; k < hc; ++k) row[k] = row[k] / sum + eps;
  }
  auto normalize_columns = [&] {
    for (int64_t k = 0; k < hc; ++k) {
      float sum = 0.0f;
      for (int64_t j = 0; j < hc; ++j) sum += c[j * hc + k];
      for (int64_t j = 0; j < hc; ++j) c[j * hc + k] /= sum + eps;
    }
  };
  normalize_columns();
  for (int64_t it = 1; it < iters; ++it) {
    for (int64_t j = 0; j < hc; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < hc; ++k) sum += c[j * hc + k];
      for (int64_t k = 0; k < hc; ++k) c[j * hc + k] /= sum + eps;
    }
    normalize_columns();
  }
}

void select_best(const std::vector<float>& score, int64_t limit, bool drop_neg_inf,
                 std::span<int32_t> out) {
  const int64_t k = std::min<int64_t>(static_cast<int64_t>(out.size()),
                                      static_cast<int64_t>(score.size()));
  std::vector<int32_t> idx = torch_topk(score, k, false);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (drop_neg_inf) std::erase_if(idx, [&](int32_t i) { return score[i] == kNegInf; });
  std::sort(idx.begin(), idx.end());
  std::fill(out.begin(), out.end(), -1);
  for (size_t i = 0; i < idx.size(); ++i) out[i] = idx[i] < limit ? idx[i] : -1;
}

}  // namespace flashdesk::cpu
