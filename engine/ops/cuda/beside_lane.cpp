// The beside lane (beside_lane.h).
#include "engine/ops/cuda/beside_lane.h"

#include <algorithm>
#include <string>

#include "engine/util/error.h"

namespace flashdesk::cuda {

void trace_host_event(const char* name);  // device_context.h

BesideLane::~BesideLane() {
  // The lane's scratch goes back to the pool: its kernels must be done with it.
  cudaStreamSynchronize(stream_.get());
}

void BesideLane::begin(cudaStream_t main) {
  fork_.record(main);
  fork_.wait_in(stream_.get());
}

int64_t BesideLane::end() {
  const int64_t id = next_id_++;
  done_[static_cast<size_t>(id % kEvents)].record(stream_.get());
  return id;
}

void BesideLane::join(int64_t id, cudaStream_t main) {
  FD_CHECK(id >= 0 && id < next_id_,
           "beside lane: join of section " + std::to_string(id) + " that was never issued");
  // A later section's join covers this one: the lane runs its sections in order (a step's Engram
  // rows, gathered at its start, are taken after the sublayers' own sections were joined).
  if (id <= joined_through_) return;
  FD_CHECK(id >= next_id_ - kEvents,
           "beside lane: join of section " + std::to_string(id) + " that is not outstanding");
  if (id > merged_through_) done_[static_cast<size_t>(id % kEvents)].wait_in(main);
  joined_through_ = std::max(joined_through_, id);
  std::erase_if(parked_, [&](const auto& p) { return p.first <= id; });
}

unsigned* BesideLane::counters(int64_t count, bool capturing) {
  // The old buffer goes back to the pool: the lane's kernels must be done with it.
  if (counters_.defined() && counters_.numel() < count) {
    if (capturing)
      park(counters_);
    else {
      trace_host_event("beside lane counters: waits for the lane");
      stream_.synchronize();
    }
  }
  return grow_arrival_counters(counters_, count, pool_, stream_.get());
}

void BesideLane::merge_into(cudaStream_t main) {
  const int64_t last = next_id_ - 1;
  if (last > joined_through_ && last > merged_through_ && last >= capture_first_) {
    merge_.record(stream_.get());
    merge_.wait_in(main);
  }
  if (last >= capture_first_) merged_through_ = std::max(merged_through_, last);
}

}  // namespace flashdesk::cuda
