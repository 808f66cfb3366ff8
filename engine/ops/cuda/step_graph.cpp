// Step graphs (step_graph.h).
#include "engine/ops/cuda/step_graph.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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

size_t StepGraph::records_requested() {
  const char* v = std::getenv("FLASHDESK_CUDA_GRAPH_RECORDS");
  if (!v) return 4;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  // The whole value a number ("4x" is not 4).
  FD_CHECK(end != v && *end == '\0' && n >= 1 && n <= 64,
           std::string("FLASHDESK_CUDA_GRAPH_RECORDS: 1 to 64, not '") + v + "'");
  return static_cast<size_t>(n);
}

bool StepGraph::trace_requested() {
  const char* v = std::getenv("FLASHDESK_STEP_GRAPH_TRACE");
  return v && std::string(v) == "1";
}

StepGraph::~StepGraph() {
  if (in_step_) {
    detach_step_stream(main_);
    detach_step_stream(beside_);
  }
  for (Records& records : segments_)
    for (Record& r : records)
      if (r.exec) cudaGraphExecDestroy(r.exec);
}

StepGraph::Records& StepGraph::records() {
  if (segments_.size() <= segment_) segments_.resize(segment_ + 1);
  return segments_[segment_];
}

void StepGraph::start_capture() {
  // Relaxed: the pool may still cudaMalloc a block it has not cached yet while a step is
  // captured (the other modes forbid that call on this thread).
  FD_CUDA_CHECK(cudaStreamBeginCapture(main_, cudaStreamCaptureModeRelaxed));
  mode_ = Mode::Capturing;
  ops_.clear();
}

void StepGraph::start_segment() {
  events_.clear();
  const Records& recs = records();
  if (replay_ && !recs.empty()) {
    mode_ = Mode::Replaying;
    alive_.resize(recs.size());
    for (size_t i = 0; i < recs.size(); ++i) alive_[i] = i;
    matched_ = 0;
    return;
  }
  start_capture();
}

void StepGraph::begin(cudaStream_t main, cudaStream_t beside) {
  FD_CHECK(!in_step_, "step graph: a step is already open");
  // The last step's graphs must have read the staging before it is reused.
  if (used_) done_.synchronize();
  for (PinnedStaging& s : staging_) s.reset();
  used_ = true;
  main_ = main;
  beside_ = beside;
  segment_ = 0;
  start_segment();  // first: a capture that does not start leaves no step open
  in_step_ = true;
  attach_step_stream(main_, this);
  attach_step_stream(beside_, this);
}

int StepGraph::event_index(const void* event) {
  for (size_t i = 0; i < events_.size(); ++i)
    if (events_[i] == event) return static_cast<int>(i);
  events_.push_back(event);
  return static_cast<int>(events_.size() - 1);
}

bool StepGraph::same(const RecordedOp& op, const StepOpKey& key, int event) {
  if (op.kind != key.kind || op.stream != key.stream) return false;
  switch (key.kind) {
    case StepOpKind::EventRecord:
    case StepOpKind::EventWait:
      return op.event == event;
    case StepOpKind::Copy:
    case StepOpKind::Fill:
      return op.target == key.target && op.source == key.source && op.bytes == key.bytes &&
             op.value == key.value;
    case StepOpKind::Library:
      return op.target == key.target && op.params.size() == key.params.size() &&
             std::memcmp(op.params.data(), key.params.data(), op.params.size()) == 0;
    case StepOpKind::Kernel:
      return op.target == key.target && op.bytes == key.bytes && op.grid.x == key.grid.x &&
             op.grid.y == key.grid.y && op.grid.z == key.grid.z && op.block.x == key.block.x &&
             op.block.y == key.block.y && op.block.z == key.block.z &&
             op.params.size() == key.params.size() &&
             std::memcmp(op.params.data(), key.params.data(), op.params.size()) == 0;
  }
  return false;
}

void StepGraph::reissue(const RecordedOp& op) {
  switch (op.kind) {
    case StepOpKind::EventRecord:
      FD_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(const_cast<void*>(events_[op.event])),
                                    op.stream));
      break;
    case StepOpKind::EventWait:
      FD_CUDA_CHECK(cudaStreamWaitEvent(
          op.stream, static_cast<cudaEvent_t>(const_cast<void*>(events_[op.event])), 0));
      break;
    default:
      op.reissue();
  }
}

void StepGraph::capture_after(const Record* prefix, size_t matched) {
  start_capture();
  for (size_t i = 0; i < matched; ++i) {
    reissue(prefix->ops[i]);
    ops_.push_back(prefix->ops[i]);
  }
}

StepOffer StepGraph::offer(const StepOpKey& key) {
  if (mode_ == Mode::Off) return StepOffer::Issue;
  const bool is_event = key.kind == StepOpKind::EventRecord || key.kind == StepOpKind::EventWait;
  const int event = is_event ? event_index(key.target) : -1;
  if (mode_ == Mode::Replaying) {
    const Records& recs = records();
    const size_t first_alive = alive_.front();
    std::erase_if(alive_, [&](size_t r) {
      return matched_ >= recs[r].ops.size() || !same(recs[r].ops[matched_], key, event);
    });
    if (!alive_.empty()) {
      ++matched_;
      return StepOffer::Taken;
    }
    ++counts_.replay_stops;
    counts_.last_stop = key.name;
    if (trace_) trace_stop(recs[first_alive], key, event);
    capture_after(&recs[first_alive], matched_);
  }
  RecordedOp op;
  op.kind = key.kind;
  op.stream = key.stream;
  op.target = key.target;
  op.source = key.source;
  op.bytes = key.bytes;
  op.value = key.value;
  op.grid = key.grid;
  op.block = key.block;
  op.params.assign(key.params.begin(), key.params.end());
  op.event = event;
  ops_.push_back(std::move(op));
  return is_event ? StepOffer::Issue : StepOffer::IssueAndKeep;
}

// FLASHDESK_STEP_GRAPH_TRACE=1: why each replay stopped, on stderr (what to move into device
// memory next).
void StepGraph::trace_stop(const Record& record, const StepOpKey& key, int event) const {
  std::string why = "more ops than recorded";
  if (matched_ < record.ops.size()) {
    const RecordedOp& op = record.ops[matched_];
    if (op.kind != key.kind)
      why = "another kind of op";
    else if (key.kind == StepOpKind::Copy || key.kind == StepOpKind::Fill)
      why = "recorded " + std::to_string(op.bytes) + " bytes (direction or value " +
            std::to_string(op.value) + ")" + (op.target == key.target ? "" : " to elsewhere") +
            (op.source == key.source ? "" : " from elsewhere") + ", now " +
            std::to_string(key.bytes) + " (" + std::to_string(key.value) + ")";
    else if (op.target != key.target)
      why = "another kernel or call";
    else if (op.event != event)
      why = "another event";
    else if (op.params.size() != key.params.size())
      why = "other parameter sizes";
    else {
      why = "another launch shape";
      for (size_t i = 0; i < op.params.size(); ++i)
        if (op.params[i] != key.params[i]) {
          // The aligned 8 bytes around it, as the record has them and as they are now (an
          // address, a size, a stray byte).
          const size_t at = i / 8 * 8, n = std::min<size_t>(8, op.params.size() - at);
          uint64_t was = 0, now = 0;
          std::memcpy(&was, &op.params[at], n);
          std::memcpy(&now, &key.params[at], n);
          char words[64];
          std::snprintf(words, sizeof(words), " (0x%llx, now 0x%llx)",
                        static_cast<unsigned long long>(was), static_cast<unsigned long long>(now));
          why = "parameter bytes from " + std::to_string(i) + words;
          break;
        }
    }
  }
  std::fprintf(stderr, "step graph: segment %zu: replay stopped at op %zu (%s): %s\n", segment_,
               matched_, key.name, why.c_str());
}

void StepGraph::keep_reissue(std::function<void()> reissue) {
  FD_CHECK(mode_ == Mode::Capturing && !ops_.empty(), "step graph: nothing to keep a reissue for");
  ops_.back().reissue = std::move(reissue);
}

void StepGraph::keep_captured(cudaGraph_t graph) {
  Records& recs = records();
  size_t nodes = 0;
  const cudaError_t counted = cudaGraphGetNodes(graph, nullptr, &nodes);
  if (counted != cudaSuccess) {
    cudaGraphDestroy(graph);
    FD_CUDA_CHECK(counted);
  }
  Record made;
  made.ops = std::move(ops_);
  ops_.clear();
  if (nodes == 0) {
    cudaGraphDestroy(graph);
    ++counts_.empty;
  } else {
    // While the segment has room, a new record is instantiated: updating one in place would
    // lose it, and steps that alternate (inputs of several sets, a compressor every few steps)
    // would then never find theirs again. Once full, the least recently used record makes room:
    // updated in place where it has this graph's topology (which costs the host far less than
    // instantiating), else replaced.
    if (recs.size() == records_per_segment_ && recs.back().exec) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(recs.back().exec, graph, &info) == cudaSuccess) {
        made.exec = recs.back().exec;
        recs.pop_back();
        ++counts_.updates;
      } else {
        cudaGetLastError();  // a failed update is an answer (another topology), not an error
      }
    }
    if (!made.exec) {
      const cudaError_t instantiated = cudaGraphInstantiate(&made.exec, graph, 0);
      cudaGraphDestroy(graph);
      FD_CUDA_CHECK(instantiated);
      ++counts_.instantiations;
    } else {
      cudaGraphDestroy(graph);
    }
    FD_CUDA_CHECK(cudaGraphLaunch(made.exec, main_));
    ++counts_.launches;
  }
  if (recs.size() == records_per_segment_) {
    if (recs.back().exec) cudaGraphExecDestroy(recs.back().exec);
    recs.pop_back();
  }
  recs.insert(recs.begin(), std::move(made));
}

void StepGraph::finish_segment() {
  if (mode_ == Mode::Replaying) {
    Records& recs = records();
    const auto whole = std::find_if(alive_.begin(), alive_.end(),
                                    [&](size_t r) { return recs[r].ops.size() == matched_; });
    if (whole != alive_.end()) {
      const size_t r = *whole;
      if (recs[r].exec) {  // an empty segment (between two host reads) launches nothing
        FD_CUDA_CHECK(cudaGraphLaunch(recs[r].exec, main_));
        ++counts_.launches;
        ++counts_.replays;
      }
      std::rotate(recs.begin(), recs.begin() + static_cast<std::ptrdiff_t>(r),
                  recs.begin() + static_cast<std::ptrdiff_t>(r) + 1);
      mode_ = Mode::Off;
      ++segment_;
      return;
    }
    // Every record still alive has more ops than this segment issued.
    ++counts_.replay_stops;
    counts_.last_stop = "the segment's end";
    if (trace_)
      std::fprintf(stderr,
                   "step graph: segment %zu: replay stopped at its end, op %zu: fewer ops "
                   "than recorded\n",
                   segment_, matched_);
    capture_after(&recs[alive_.front()], matched_);
  }
  mode_ = Mode::Off;
  cudaGraph_t graph = nullptr;
  FD_CUDA_CHECK(cudaStreamEndCapture(main_, &graph));
  keep_captured(graph);
  ++segment_;
}

void StepGraph::suspend() {
  FD_CHECK(mode_ != Mode::Off, "step graph: suspend outside a recording");
  finish_segment();
}

void StepGraph::resume() {
  FD_CHECK(in_step_ && mode_ == Mode::Off, "step graph: resume outside a suspended step");
  start_segment();
}

void StepGraph::end() {
  FD_CHECK(in_step_, "step graph: end without a step");
  if (mode_ != Mode::Off) finish_segment();
  detach_step_stream(main_);
  detach_step_stream(beside_);
  done_.record(main_);
  in_step_ = false;
  last_step_segments_ = segment_;
}

void StepGraph::abort() {
  if (mode_ == Mode::Capturing) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(main_, &graph);  // may fail: the capture may be what went wrong
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  mode_ = Mode::Off;
  ops_.clear();
  detach_step_stream(main_);
  detach_step_stream(beside_);
  // Segments launched before the failure may still read this step's staging.
  if (in_step_ && cudaEventRecord(done_.get(), main_) != cudaSuccess) cudaGetLastError();
  in_step_ = false;
}

const void* StepGraph::stage(const void* data, size_t bytes) {
  // Each segment stages from its own buffer: its copies' sources then do not move with what
  // earlier segments uploaded (a host-expert layer's segments replay whatever the routing was).
  while (staging_.size() <= segment_) staging_.emplace_back();
  return staging_[segment_].copy(data, bytes);
}

void StepGraph::relaunch_last() {
  FD_CHECK(!in_step_ && last_step_segments_ == 1 && !segments_.empty() && !segments_[0].empty() &&
               segments_[0].front().exec,
           "step graph: relaunch needs a finished step of one segment");
  FD_CUDA_CHECK(cudaGraphLaunch(segments_[0].front().exec, main_));
  ++counts_.launches;
}

}  // namespace flashdesk::cuda
