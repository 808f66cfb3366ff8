// The in-process all-reduce (thread_collective.h).
#include "engine/ops/thread_collective.h"

#include <algorithm>

#include "engine/util/error.h"

namespace flashdesk {

ThreadCollective::Shared::Shared(int world_size)
    : world(world_size), posted(static_cast<size_t>(world_size)), sync(world_size) {}

void ThreadCollective::all_reduce_sum(Tensor& t) {
  check_dtype(t, DType::F32, "all_reduce_sum");
  const int64_t n = t.numel();
  shared_.posted[static_cast<size_t>(rank_)] = t.data<float>();
  shared_.sync.arrive_and_wait();
  std::vector<float> sum(static_cast<size_t>(n), 0.0f);
  for (int r = 0; r < shared_.world; ++r) {
    const float* p = shared_.posted[static_cast<size_t>(r)];
    for (int64_t i = 0; i < n; ++i) sum[static_cast<size_t>(i)] += p[i];
  }
  shared_.sync.arrive_and_wait();  // every rank has read every rank's tensor
  std::copy(sum.begin(), sum.end(), t.data<float>());
  shared_.sync.arrive_and_wait();
}

}  // namespace flashdesk
