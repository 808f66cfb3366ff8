// Which launches overlap the kernel before them on their stream (programmatic dependent launch,
// cuda_compat.cuh), as FLASHDESK_CUDA_PDL and the stream's last operation decide. Host code only
// (device_context.cpp defines it).
#pragma once

#include "engine/ops/cuda/cuda_runtime_compat.h"

namespace flashdesk::cuda {

// Whether launches on the current device may start before the previous kernel of their stream
// has finished (programmatic dependent launch: Hopper and later, FLASHDESK_CUDA_PDL not 0).
bool programmatic_launch_enabled();
// Whether the decode GEMVs and experts issue their first weight loads before that wait (not when
// FLASHDESK_CUDA_PDL=noprefetch).
bool gemv_weights_before_wait();
// A kernel issued to a stream right after an event wait (a beside lane's fork or join) launches
// without the overlap. With it, step graphs went wrong: when a sublayer boundary only took a few
// more cycles before its wait, the goldens' decode steps came out off (rel RMS 0.81 against
// 0.40) as step graphs, and right as plain launches; with the kernels after waits launched
// plainly the graphs gave the plain launches' logits again, at no measurable cost (H100,
// 2026-12-06; docs/cuda-backend.md). A guess, not confirmed: a captured kernel after a wait has
// two predecessors, and its wait did not cover both. note_event_wait marks the stream
// (step_ops.cpp wait_event); take_event_wait reads and clears the mark at the stream's next launch.
void note_event_wait(cudaStream_t stream);
bool take_event_wait(cudaStream_t stream);

}  // namespace flashdesk::cuda
