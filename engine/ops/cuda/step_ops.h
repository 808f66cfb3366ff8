// The stream operations of the CUDA backend (kernel launches, asynchronous copies and fills, event
// records and waits, a library's work) as the step graphs see them (step_graph.h). Each is first
// offered to the step that owns its stream, if a step is open there: while the step is captured
// the step records what the operation was, and while it replays a recorded step it checks the
// operation against the record and takes it (the recorded graph will run it) instead of letting
// it be issued. Every operation of the backend on its streams goes through here, so that a
// replayed step issues nothing behind the step's back.
//
// Goals: a step replayed without capturing it, when its operations are the recorded ones byte for
// byte (the same kernels with the same parameter bytes, the same copies from the same pinned
// staging), which costs the host a comparison per operation instead of a launch or a capture.
// A library's call (a cuBLAS product, an NCCL all-reduce) is one operation: the same call with the
// same arguments issues the same work. Non-goals: streams other than a step's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <tuple>
#include <vector>

#include "engine/ops/cuda/cuda_runtime_compat.h"

namespace flashdesk::cuda {

enum class StepOpKind : uint8_t { Kernel, Copy, Fill, EventRecord, EventWait, Library };

// What an operation is, as far as a replay needs: two operations with equal keys do the same
// work on the device.
struct StepOpKey {
  StepOpKind kind = StepOpKind::Kernel;
  cudaStream_t stream = nullptr;
  const void* target = nullptr;  // the kernel; a copy's or fill's destination; the event; the
                                 // library call's tag
  const void* source = nullptr;  // a copy's source
  size_t bytes = 0;              // a copy's or fill's bytes; a kernel's dynamic shared memory
  int value = 0;                 // a fill's byte value; a copy's direction
  dim3 grid{}, block{};
  std::span<const unsigned char> params;  // a kernel's or library call's argument bytes
  const char* name = "";                  // what the counts of stopped replays name
};

enum class StepOffer {
  Issue,         // issue it (no step records this stream now)
  IssueAndKeep,  // issue it (captured) and hand the step a way to issue it again (keep_reissue)
  Taken,         // do not issue it: the replayed step's graph runs it
};

// A step that records or replays the operations of some streams (StepGraph).
class StepOpSink {
 public:
  virtual StepOffer offer(const StepOpKey& key) = 0;
  // After IssueAndKeep: issues the same operation again (on a later step whose replay stopped
  // part way and is captured from its start).
  virtual void keep_reissue(std::function<void()> reissue) = 0;

 protected:
  ~StepOpSink() = default;
};

// The sink of the step open on `stream` on this thread, or null.
StepOpSink* step_sink(cudaStream_t stream);
// While a step is open, its streams belong to it (on the calling thread).
void attach_step_stream(cudaStream_t stream, StepOpSink* sink);
void detach_step_stream(cudaStream_t stream);

// The backend's non-kernel stream operations, offered to the stream's step first.
void copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
void fill_async(void* dst, int value, size_t bytes, cudaStream_t stream);
void record_event(cudaEvent_t event, cudaStream_t stream);
void wait_event(cudaStream_t stream, cudaEvent_t event);
// A library's call on `stream` (`name` also its tag), identified by `args`: `issue` makes it
// (now, and again where a stopped replay is captured).
void library_call(cudaStream_t stream, const char* name, std::span<const unsigned char> args,
                  const std::function<void()>& issue);

// A kernel's parameters as bytes, one after another (what StepOpKey::params compares), in
// `buffer`.
template <class Tuple>
std::span<const unsigned char> parameter_bytes(const Tuple& params,
                                               std::vector<unsigned char>& buffer) {
  std::apply(
      [&](const auto&... p) {
        buffer.resize((size_t{0} + ... + sizeof(p)));
        size_t at = 0;
        ((std::memcpy(buffer.data() + at, &p, sizeof(p)), at += sizeof(p)), ...);
      },
      params);
  return {buffer.data(), buffer.size()};
}

}  // namespace flashdesk::cuda
