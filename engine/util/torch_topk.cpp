// torch.topk's CPU selection and the order of its short row sums (see torch_topk.h for why and
// how they are checked).
#include "engine/util/torch_topk.h"

#include <algorithm>

#include "engine/util/torch_select.h"

namespace flashdesk {

std::vector<int32_t> torch_topk(std::span<const float> values, int64_t k, bool sorted) {
  const auto n = static_cast<int64_t>(values.size());
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<torch_select::Scored> pairs(values.size());
  for (int64_t j = 0; j < n; ++j)
    pairs[static_cast<size_t>(j)] = {values[static_cast<size_t>(j)], static_cast<int32_t>(j)};
  torch_select::select(pairs.data(), n, k, sorted);
  std::vector<int32_t> out(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) out[static_cast<size_t>(j)] = pairs[static_cast<size_t>(j)].index;
  return out;
}

float torch_row_sum(std::span<const float> row) {
  if (row.size() == 6) return ((((row[0] + row[4]) + row[5]) + row[1]) + row[2]) + row[3];
  float sum = 0.0f;
  for (const float v : row) sum += v;
  return sum;
}

}  // namespace flashdesk
