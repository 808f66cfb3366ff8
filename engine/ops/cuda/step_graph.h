// A step's kernels launched as CUDA graphs (Backend::step_graph_begin / step_graph_end): the ops
// issued between begin() and end() are captured from the main stream (the beside lane joins the
// capture through its fork and join events) and launched as one graph, so the device runs them
// without the per-launch work of the host and the gaps between launches.
//
// A host read or synchronisation inside a step cuts it: the work captured so far is launched, the
// read waits for it, and capture starts again (suspend / resume), so the caller sees the same
// order as without graphs. Each cut-off part (segment) of a step keeps its instantiated graphs;
// the next step's capture of the same segment updates one of them in place
// (cudaGraphExecUpdate: the same kernels, new arguments and addresses), which costs the host far
// less than instantiating. Host values the ops upload while capturing are copied into pinned
// staging memory that lives until the step's graphs have run (a captured copy reads its source
// when the graph runs, not when it is captured).
//
// Non-goals: replaying a step without capturing it (the positions and lengths a step's kernels
// take are host arguments today; docs/cuda-backend.md "Step graphs"), graphs for prefill-sized
// steps (few large kernels: nothing to gain, a new instantiation per shape).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/ops/cuda/cuda_handles.h"
#include "engine/ops/cuda/step_graph_counts.h"

namespace flashdesk::cuda {

// Pinned host memory handed out in order and reset as a whole; grows by chunks, never shrinks.
class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  void* copy(const void* data, size_t bytes);
  void reset();

 private:
  struct Chunk {
    void* base = nullptr;
    size_t bytes = 0;
  };
  std::vector<Chunk> chunks_;
  size_t chunk_ = 0, used_ = 0;  // where the next copy goes
};

class StepGraph {
 public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // True between begin() and end() / abort() while not suspended: ops are being recorded.
  bool capturing() const { return capturing_; }
  bool in_step() const { return in_step_; }

  void begin(cudaStream_t main);
  // Launches what was captured so far (before a host read or synchronisation) ...
  void suspend(cudaStream_t main);
  // ... and starts capturing the rest of the step.
  void resume(cudaStream_t main);
  // Launches the step's last segment.
  void end(cudaStream_t main);
  // Ends the capture without launching it (an exception inside the step).
  void abort(cudaStream_t main);
  // A pinned copy of `bytes` host bytes that stays valid until the step's graphs have run.
  const void* stage(const void* data, size_t bytes);
  // Launches the last step's graphs again without capturing (benchmarks only: the same step,
  // positions and inputs again; valid while no other step began and the last one had one segment).
  void relaunch_last(cudaStream_t main);

  const StepGraphCounts& counts() const { return counts_; }

 private:
  // Executable graphs a segment keeps (most recently used first): a step whose shape alternates
  // (a compressor that runs every few steps) finds one of the same topology.
  static constexpr size_t kExecsPerSegment = 4;
  void start_capture(cudaStream_t main);
  void launch_segment(cudaStream_t main);

  std::vector<std::vector<cudaGraphExec_t>> segments_;
  size_t segment_ = 0, last_step_segments_ = 0;
  bool capturing_ = false, in_step_ = false;
  // Two stagings: a step's copies live in one while the previous step's graphs may still read
  // the other; done_[i] marks the end of the last step that used staging i.
  PinnedStaging staging_[2];
  Event done_[2];
  bool used_[2] = {false, false};
  int current_ = 0;
  StepGraphCounts counts_;
};

}  // namespace flashdesk::cuda
