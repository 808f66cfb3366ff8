// RAII handles of the CUDA runtime and the failure messages of FD_CUDA_CHECK / FD_CUBLAS_CHECK.
#include "engine/ops/cuda/cuda_handles.h"

#include "engine/ops/cuda/step_ops.h"

#include <cstdio>
#include <string>

namespace flashdesk::cuda {

void cuda_call_failed(int code, const char* name, const char* text, const char* call,
                      const char* file, int line) {
  throw CudaError("CUDA error " + std::to_string(code) + " " + name + " (" + text + ") in " + call +
                  " at " + file + ":" + std::to_string(line));
}

void cublas_call_failed(int status, const char* call, const char* file, int line) {
  throw CudaError("cuBLAS error " + std::to_string(status) + " in " + call + " at " + file + ":" +
                  std::to_string(line));
}

Stream::Stream() {
  FD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  // A destructor must not throw; a failure here means the context is already gone.
  if (stream_) cudaStreamDestroy(stream_);
}

void Stream::synchronize() const {
  FD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Event::Event() {
  FD_CUDA_CHECK(cudaEventCreate(&event_));
}

Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) {
  record_event(event_, stream);
}

void Event::synchronize() const {
  FD_CUDA_CHECK(cudaEventSynchronize(event_));
}

void Event::wait_in(cudaStream_t stream) const {
  wait_event(stream, event_);
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0.0f;
  FD_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

DeviceGuard::DeviceGuard(int device) {
  FD_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) {
    FD_CUDA_CHECK(cudaSetDevice(device));
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) cudaSetDevice(previous_);
}

}  // namespace flashdesk::cuda
