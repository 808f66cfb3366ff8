// The forms of torch's selection on the GPU that the selection's tests run (CudaBackend's
// set_select_runs and set_heap_steps): every form must give torch's arrangement.
#pragma once

#include "engine/ops/cuda/cuda_backend.h"

namespace flashdesk::test {

struct SelectFormCase {
  bool runs;                   // partitions over runs (partition_runs), else by the whole block
  cuda::HeapSteps heap_steps;  // who takes the heap select's steps, on which copy
  const char* what;
  bool warp_tail = false;   // the whole block's partitions, the short ranges on one warp
  bool stop_masks = false;  // the block's partitions keep their count pass's stop masks
};

inline constexpr SelectFormCase kSelectForms[] = {
    {false, cuda::HeapSteps::InPlace, "whole-block partitions, one thread's heap steps in place"},
    {true, cuda::HeapSteps::Warp, "partitions over runs, a warp's heap steps in shared memory"},
    {false, cuda::HeapSteps::Thread,
     "whole-block partitions keeping their stop masks, ranges of at most 512 on one warp, one "
     "thread's heap steps",
     true, true},
    {false, cuda::HeapSteps::Thread,
     "whole-block partitions, one thread's heap steps in shared memory"},
};

// Sets the backend's selection to `form`.
inline void use_select_form(CudaBackend& backend, const SelectFormCase& form) {
  backend.set_select_runs(form.runs);
  backend.set_select_warp_tail(form.warp_tail);
  backend.set_select_stop_masks(form.stop_masks);
  backend.set_heap_steps(form.heap_steps);
}

}  // namespace flashdesk::test
