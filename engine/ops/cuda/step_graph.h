// A step's kernels launched as CUDA graphs (Backend::step_graph_begin / step_graph_end): the ops
// issued between begin() and end() run as graphs, so the device runs them without the per-launch
// work of the host and the gaps between launches.
//
// Replay. Every stream operation of the backend is offered to the open step first (step_ops.h).
// A step whose segment was recorded before (the ops of a captured graph, kept with it) is first
// replayed: each op is compared with the record and, while they agree, taken without being issued;
// when the segment ends and every recorded op was met, the recorded graph is launched as it is, at
// the cost of a comparison per op on the host. The first op that differs (a new position among a
// kernel's parameters, a copy of other bytes) stops the replay: the step is captured from there,
// after the ops matched so far were issued again into the capture, and the new graph is kept as a
// record of the segment. A segment keeps up to four records (a step whose shape alternates, a
// compressor that runs every few steps, inputs that take turns, finds its own;
// FLASHDESK_CUDA_GRAPH_RECORDS sets another count, for measuring steps of many shapes).
//
// Capture. A host read or synchronisation inside a step cuts it: what was replayed or captured so
// far is launched, the read waits for it, and the rest of the step is a new segment (suspend /
// resume), so the caller sees the same order as without graphs; the backend also cuts a step
// without a wait (every few layers, DeviceContext::step_cut), so the device runs one segment while
// the host matches the next. A captured segment is instantiated while it has room for another
// record; once full, its least recently used record is updated in place where it has the same
// topology (cudaGraphExecUpdate: the same kernels, new arguments), which costs the host far less
// than instantiating, or replaced. Host values the ops upload inside a step are copied into pinned
// staging memory (a graph's copy reads its source when it runs); a replayed step writes its values
// to the same places, so the recorded copies carry them. A staging buffer a segment, used again by
// every step, so a step begins once the previous step's graphs have run: a decode loop reads each
// step's logits before the next step anyway, and two buffers a segment (the host a step ahead)
// would give every other step other copy sources, which halves the steps a record can match.
//
// Non-goals: graphs for prefill-sized steps (few large kernels: nothing to gain, a new
// instantiation per shape); replaying across a library's work (cuBLAS, NCCL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "engine/ops/cuda/cuda_handles.h"
#include "engine/ops/cuda/step_graph_counts.h"
#include "engine/ops/cuda/step_ops.h"

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

class StepGraph final : public StepOpSink {
 public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // True between begin() and end() / abort() while not suspended: ops are recorded or replayed.
  bool recording() const { return mode_ != Mode::Off; }
  bool in_step() const { return in_step_; }
  // Whether recorded segments are replayed (else every step is captured; for comparisons).
  void set_replay(bool on) { replay_ = on; }

  // The step's ops go to `main` and `beside` (the beside lane's stream).
  void begin(cudaStream_t main, cudaStream_t beside);
  // Launches what was recorded so far (before a host read or synchronisation) ...
  void suspend();
  // ... and records the rest of the step.
  void resume();
  // Launches the step's last segment.
  void end();
  // Ends the step without launching the open segment (an exception inside the step).
  void abort();
  // A pinned copy of `bytes` host bytes that stays valid until the step's graphs have run.
  const void* stage(const void* data, size_t bytes);
  // Launches the last step's graphs again without capturing (benchmarks only: the same step,
  // positions and inputs again; valid while no other step began and the last one had one segment).
  void relaunch_last();

  const StepGraphCounts& counts() const { return counts_; }

  StepOffer offer(const StepOpKey& key) override;
  void keep_reissue(std::function<void()> reissue) override;

 private:
  // FLASHDESK_CUDA_GRAPH_RECORDS=N (1-64, default 4): the records a segment keeps.
  static size_t records_requested();
  static bool trace_requested();
  enum class Mode { Off, Replaying, Capturing };
  struct RecordedOp {
    StepOpKind kind = StepOpKind::Kernel;
    cudaStream_t stream = nullptr;
    const void* target = nullptr;
    const void* source = nullptr;
    size_t bytes = 0;
    int value = 0;
    dim3 grid{}, block{};
    std::vector<unsigned char> params;
    int event = -1;                 // events: the index of the event's first use in the segment
    std::function<void()> reissue;  // kernels, copies, fills
  };
  struct Record {
    std::vector<RecordedOp> ops;
    cudaGraphExec_t exec = nullptr;  // null: nothing was captured
  };
  using Records = std::vector<Record>;  // most recently used first

  Records& records();  // the open segment's
  void start_segment();
  void start_capture();
  // The replay stopped after `matched` ops that agreed with `prefix`: captures the segment,
  // issuing those ops again first.
  void capture_after(const Record* prefix, size_t matched);
  void finish_segment();
  void keep_captured(cudaGraph_t graph);
  int event_index(const void* event);
  static bool same(const RecordedOp& op, const StepOpKey& key, int event);
  void reissue(const RecordedOp& op);
  void trace_stop(const Record& record, const StepOpKey& key, int event) const;

  std::vector<Records> segments_;
  size_t segment_ = 0, last_step_segments_ = 0;
  Mode mode_ = Mode::Off;
  bool in_step_ = false, replay_ = true;
  const bool trace_ = trace_requested();
  const size_t records_per_segment_ = records_requested();
  cudaStream_t main_ = nullptr, beside_ = nullptr;
  // Replaying: the open segment's records that agree with every op so far, and how many agreed.
  std::vector<size_t> alive_;
  size_t matched_ = 0;
  // Capturing: the open segment's ops.
  std::vector<RecordedOp> ops_;
  // The open segment's events, by first use.
  std::vector<const void*> events_;
  std::deque<PinnedStaging> staging_;  // a segment's, by segment
  Event done_;                         // the end of the last step's graphs
  bool used_ = false;
  StepGraphCounts counts_;
};

}  // namespace flashdesk::cuda
