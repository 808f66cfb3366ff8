// torch.topk's CPU selection and the order of its short row sums (see torch_topk.h for why and
// how they are checked).
#include "engine/util/torch_topk.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace flashdesk {

std::vector<int32_t> torch_topk(std::span<const float> values, int64_t k, bool sorted) {
  const int64_t n = static_cast<int64_t>(values.size());
  k = std::clamp<int64_t>(k, 0, n);
  if (k == 0) return {};
  using Elem = std::pair<float, int64_t>;
  std::vector<Elem> queue(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    queue[static_cast<size_t>(j)] = {values[static_cast<size_t>(j)], j};
  // Larger first; NaN before everything (numpy's order, as torch keeps it).
  auto larger = [](const Elem& x, const Elem& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (k * 64 <= n) {
    std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), larger);
  } else {
    std::nth_element(queue.begin(), queue.begin() + (k - 1), queue.end(), larger);
    if (sorted) std::sort(queue.begin(), queue.begin() + (k - 1), larger);
  }
  std::vector<int32_t> out(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j)
    out[static_cast<size_t>(j)] = static_cast<int32_t>(queue[static_cast<size_t>(j)].second);
  return out;
}

float torch_row_sum(std::span<const float> row) {
  if (row.size() == 6) return ((((row[0] + row[4]) + row[5]) + row[1]) + row[2]) + row[3];
  float sum = 0.0f;
  for (const float v : row) sum += v;
  return sum;
}

}  // namespace flashdesk
