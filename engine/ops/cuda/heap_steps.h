// Who takes the heap select's steps in torch's selection on the GPU (torch_select_block.cuh), on
// which copy of the heap: one thread on the heap in place (the row's slots: global memory for the
// indexer's wide rows), a warp on the heap copied into the caller's shared room (warp_pop_to), or
// one thread on that copy (thread_heap_steps). Warp and Thread fall back to InPlace where the
// heap does not fit the room. Shared by the backend's switch and the selection's form.
#pragma once

#include <cstdint>

namespace flashdesk::cuda {

enum class HeapSteps : uint8_t { InPlace, Warp, Thread };

}  // namespace flashdesk::cuda
