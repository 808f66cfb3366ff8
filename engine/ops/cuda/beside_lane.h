// The beside lane of a CudaBackend (Backend::hc_mixes_beside): a second stream for work that the
// ops issued after it do not read until Backend::join, so that it runs while they do (a decode
// sublayer's mHC mixes beside its attention or experts). The pool and the arrival counters are
// ordered by the main stream only, so the lane keeps its own scratch and counters.
#pragma once

#include <array>
#include <cstdint>

#include "engine/ops/cuda/cuda_handles.h"
#include "engine/ops/cuda/device_memory.h"
#include "engine/ops/tensor.h"

namespace flashdesk::cuda {

class BesideLane {
 public:
  explicit BesideLane(DevicePool& pool) : pool_(pool) {}
  ~BesideLane();
  BesideLane(const BesideLane&) = delete;
  BesideLane& operator=(const BesideLane&) = delete;

  // The lane's stream, ordered after everything issued to `main` so far.
  cudaStream_t begin(cudaStream_t main);
  // Marks the end of the work issued to the lane since begin(); the id join() takes.
  int64_t end();
  // Work issued to `main` after this call waits for the lane's work up to `id`.
  void join(int64_t id, cudaStream_t main);

  // Lane-owned scratch of at least `floats` F32 values and `count` zeroed arrival counters (the
  // kernels set the counters they use back to zero). Growing waits for the lane's earlier work.
  float* partial(int64_t floats);
  unsigned* counters(int64_t count);

 private:
  // Ids outstanding at once before an event is recorded again; a sublayer joins its mixes before
  // the next sublayer forks, so two would do.
  static constexpr int64_t kEvents = 8;
  DevicePool& pool_;
  Stream stream_;
  Event fork_;
  std::array<Event, kEvents> done_;
  int64_t next_id_ = 0;
  Tensor partial_, counters_;
};

}  // namespace flashdesk::cuda
