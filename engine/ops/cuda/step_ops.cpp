// The stream operations of the CUDA backend as the step graphs see them (step_ops.h).
#include "engine/ops/cuda/step_ops.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/launch_overlap.h"

namespace flashdesk::cuda {
namespace {

// The streams of the steps open on this thread (two a step: the main stream and the beside
// lane's; a thread drives a few backends at most).
thread_local std::vector<std::pair<cudaStream_t, StepOpSink*>> t_attached;

}  // namespace

StepOpSink* step_sink(cudaStream_t stream) {
  for (const auto& [s, sink] : t_attached)
    if (s == stream) return sink;
  return nullptr;
}

void attach_step_stream(cudaStream_t stream, StepOpSink* sink) {
  detach_step_stream(stream);
  t_attached.emplace_back(stream, sink);
}

void detach_step_stream(cudaStream_t stream) {
  std::erase_if(t_attached, [&](const auto& a) { return a.first == stream; });
}

namespace {

// Offers `key` to its stream's step, then issues it unless the step took it, handing the step a
// way to issue it again where it asks for one.
template <class Issue>
void offer_then_issue(const StepOpKey& key, const Issue& issue) {
  StepOpSink* sink = step_sink(key.stream);
  const StepOffer offer = sink ? sink->offer(key) : StepOffer::Issue;
  if (offer == StepOffer::Taken) return;
  issue();
  if (offer == StepOffer::IssueAndKeep) sink->keep_reissue(issue);
}

}  // namespace

void copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                cudaStream_t stream) {
  StepOpKey key;
  key.kind = StepOpKind::Copy;
  key.stream = stream;
  key.target = dst;
  key.source = src;
  key.bytes = bytes;
  key.value = static_cast<int>(kind);
  key.name = "copy";
  offer_then_issue(key, [=] { FD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream)); });
}

void fill_async(void* dst, int value, size_t bytes, cudaStream_t stream) {
  StepOpKey key;
  key.kind = StepOpKind::Fill;
  key.stream = stream;
  key.target = dst;
  key.bytes = bytes;
  key.value = value;
  key.name = "fill";
  offer_then_issue(key, [=] { FD_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream)); });
}

// Events are re-issued by the step itself (with the events of the step being rebuilt), so an
// offer of one never asks for a way to issue it again.
static StepOpKey event_key(StepOpKind kind, cudaEvent_t event, cudaStream_t stream,
                           const char* name) {
  StepOpKey key;
  key.kind = kind;
  key.stream = stream;
  key.target = event;
  key.name = name;
  return key;
}

void record_event(cudaEvent_t event, cudaStream_t stream) {
  offer_then_issue(event_key(StepOpKind::EventRecord, event, stream, "event record"),
                   [=] { FD_CUDA_CHECK(cudaEventRecord(event, stream)); });
}

void wait_event(cudaStream_t stream, cudaEvent_t event) {
  offer_then_issue(event_key(StepOpKind::EventWait, event, stream, "event wait"), [=] {
    FD_CUDA_CHECK(cudaStreamWaitEvent(stream, event, 0));
    note_event_wait(stream);  // the next kernel on `stream` launches without the overlap
  });
}

void library_call(cudaStream_t stream, const char* name, std::span<const unsigned char> args,
                  const std::function<void()>& issue) {
  StepOpKey key;
  key.kind = StepOpKind::Library;
  key.stream = stream;
  key.target = name;
  key.params = args;
  key.name = name;
  offer_then_issue(key, issue);
}

}  // namespace flashdesk::cuda
