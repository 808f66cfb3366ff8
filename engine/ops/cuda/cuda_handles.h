// RAII owners of the CUDA runtime's handles (streams, events); each is created and destroyed
// through FD_CUDA_CHECK, and none is copyable.
#pragma once

#include "engine/ops/cuda/cuda_runtime_compat.h"

namespace flashdesk::cuda {

class Stream {
 public:
  Stream();  // non-blocking: it does not wait for the legacy default stream
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t stream);
  void synchronize() const;
  // Work issued to `stream` after this call waits for the work the last record() captured.
  void wait_in(cudaStream_t stream) const;
  // Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const Event& start) const;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Makes `device` current for the calling thread for the guard's life, restoring the previous one:
// every op of a backend runs on that backend's device, whichever device the thread used before.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace flashdesk::cuda
