// The beside lane of a CudaBackend (Backend::beside_begin / beside_end / join): a second stream
// for work that the ops issued after it do not read until the join, so that it runs while they
// do (a sublayer's mHC mixes beside its body, the KV projection beside the query's). The pool
// and the arrival counters are ordered by the main stream only, so the lane keeps the scratch
// its work allocated until the join and has counters of its own.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

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

  cudaStream_t stream() const { return stream_.get(); }
  // A section of work on the lane, ordered after everything issued to `main` so far.
  void begin(cudaStream_t main);
  // Ends the section; the id join() takes.
  int64_t end();
  // Work issued to `main` after this call waits for the lane's sections up to `id`; their
  // scratch goes back to the pool (later work of `main` is ordered after them). A section that a
  // later section's join already covered may be joined any time after (a no-op).
  void join(int64_t id, cudaStream_t main);

  // Scratch allocated by the open section, held until its join.
  void park(Tensor t) { parked_.emplace_back(next_id_, std::move(t)); }
  // At least `count` zeroed arrival counters (the kernels set the counters they use back to
  // zero). Growing waits for the lane's earlier work (while a step graph is captured, nothing
  // runs yet: the old buffer is held until the section's join instead).
  unsigned* counters(int64_t count, bool capturing = false);

  // Step graphs (step_graph.h): a capture of `main` began; sections from here on belong to it.
  void capture_started() { capture_first_ = next_id_; }
  // Before a capture of `main` ends: `main` waits for the sections of this capture not yet
  // joined (a capture must end with every stream it forked joined); their later joins need no
  // wait of their own (they are in a graph launched before anything that joins them).
  void merge_into(cudaStream_t main);

 private:
  // Sections outstanding at once before an event is recorded again; the model joins a section
  // before it opens the second one after it.
  static constexpr int64_t kEvents = 8;
  DevicePool& pool_;
  Stream stream_;
  Event fork_;
  std::array<Event, kEvents> done_;
  int64_t next_id_ = 0;
  int64_t joined_through_ = -1;  // join() waited for the sections up to here
  int64_t merged_through_ = -1;  // merge_into() ordered the sections up to here
  int64_t capture_first_ = 0;    // first section of the current capture
  Event merge_;
  std::vector<std::pair<int64_t, Tensor>> parked_;  // (section, scratch)
  Tensor counters_;
};

}  // namespace flashdesk::cuda
