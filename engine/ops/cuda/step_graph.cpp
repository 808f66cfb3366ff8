// Step graphs (step_graph.h).
#include "engine/ops/cuda/step_graph.h"

#include <algorithm>
#include <cstring>

#include "engine/util/error.h"

namespace flashdesk::cuda {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr size_t kAlign = 16;

}  // namespace

PinnedStaging::~PinnedStaging() {
  for (const Chunk& c : chunks_) cudaFreeHost(c.base);
}

void* PinnedStaging::copy(const void* data, size_t bytes) {
  const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
  while (chunk_ < chunks_.size() && used_ + need > chunks_[chunk_].bytes) {
    ++chunk_;
    used_ = 0;
  }
  if (chunk_ == chunks_.size()) {
    Chunk c;
    c.bytes = std::max(kChunkBytes, need);
    FD_CUDA_CHECK(cudaMallocHost(&c.base, c.bytes));
    chunks_.push_back(c);
    used_ = 0;
  }
  void* at = static_cast<char*>(chunks_[chunk_].base) + used_;
  if (bytes) std::memcpy(at, data, bytes);
  used_ += need;
  return at;
}

void PinnedStaging::reset() {
  chunk_ = 0;
  used_ = 0;
}

StepGraph::~StepGraph() {
  for (auto& execs : segments_)
    for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
}

void StepGraph::start_capture(cudaStream_t main) {
  // Relaxed: the pool may still cudaMalloc a block it has not cached yet while a step is
  // captured (the other modes forbid that call on this thread).
  FD_CUDA_CHECK(cudaStreamBeginCapture(main, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
}

void StepGraph::begin(cudaStream_t main) {
  FD_CHECK(!in_step_, "step graph: a step is already open");
  current_ ^= 1;
  // The step two back used this staging: its graphs must have read it before it is reused.
  if (used_[current_]) done_[current_].synchronize();
  staging_[current_].reset();
  used_[current_] = true;
  segment_ = 0;
  start_capture(main);  // first: a capture that does not start leaves no step open
  in_step_ = true;
}

void StepGraph::launch_segment(cudaStream_t main) {
  cudaGraph_t graph = nullptr;
  capturing_ = false;
  FD_CUDA_CHECK(cudaStreamEndCapture(main, &graph));
  size_t nodes = 0;
  const cudaError_t counted = cudaGraphGetNodes(graph, nullptr, &nodes);
  if (counted != cudaSuccess || nodes == 0) {
    cudaGraphDestroy(graph);
    FD_CUDA_CHECK(counted);
    ++counts_.empty;
    ++segment_;
    return;
  }
  if (segments_.size() <= segment_) segments_.resize(segment_ + 1);
  std::vector<cudaGraphExec_t>& execs = segments_[segment_];
  cudaGraphExec_t chosen = nullptr;
  for (size_t i = 0; i < execs.size() && !chosen; ++i) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(execs[i], graph, &info) == cudaSuccess) {
      chosen = execs[i];
      execs.erase(execs.begin() + static_cast<std::ptrdiff_t>(i));
      ++counts_.updates;
    } else {
      cudaGetLastError();  // a failed update is an answer (another topology), not an error
    }
  }
  if (!chosen) {
    const cudaError_t made = cudaGraphInstantiate(&chosen, graph, 0);
    if (made != cudaSuccess) {
      cudaGraphDestroy(graph);
      FD_CUDA_CHECK(made);
    }
    ++counts_.instantiations;
    if (execs.size() == kExecsPerSegment) {
      cudaGraphExecDestroy(execs.back());
      execs.pop_back();
    }
  }
  execs.insert(execs.begin(), chosen);
  cudaGraphDestroy(graph);
  FD_CUDA_CHECK(cudaGraphLaunch(chosen, main));
  ++counts_.launches;
  ++segment_;
}

void StepGraph::suspend(cudaStream_t main) {
  FD_CHECK(capturing_, "step graph: suspend outside a capture");
  launch_segment(main);
}

void StepGraph::resume(cudaStream_t main) {
  FD_CHECK(in_step_ && !capturing_, "step graph: resume outside a suspended step");
  start_capture(main);
}

void StepGraph::end(cudaStream_t main) {
  FD_CHECK(in_step_, "step graph: end without a step");
  if (capturing_) launch_segment(main);
  done_[current_].record(main);
  in_step_ = false;
  last_step_segments_ = segment_;
}

void StepGraph::abort(cudaStream_t main) {
  if (capturing_) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(main, &graph);  // may fail: the capture may be what went wrong
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    capturing_ = false;
  }
  // Segments launched before the failure may still read this step's staging.
  if (in_step_ && cudaEventRecord(done_[current_].get(), main) != cudaSuccess) cudaGetLastError();
  in_step_ = false;
}

const void* StepGraph::stage(const void* data, size_t bytes) {
  return staging_[current_].copy(data, bytes);
}

void StepGraph::relaunch_last(cudaStream_t main) {
  FD_CHECK(!in_step_ && last_step_segments_ == 1 && !segments_.empty() && !segments_[0].empty(),
           "step graph: relaunch needs a finished step of one segment");
  FD_CUDA_CHECK(cudaGraphLaunch(segments_[0].front(), main));
  ++counts_.launches;
}

}  // namespace flashdesk::cuda
