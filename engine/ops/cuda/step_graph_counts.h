// What the step graphs of a CUDA backend did so far (step_graph.h); no CUDA types, so the tests
// and benchmarks that read it need no CUDA headers.
#pragma once

#include <cstdint>

namespace flashdesk::cuda {

struct StepGraphCounts {
  uint64_t launches = 0;        // graphs launched (segments of steps)
  uint64_t instantiations = 0;  // new executable graphs
  uint64_t updates = 0;         // executable graphs updated in place
  uint64_t empty = 0;           // segments with nothing captured (not launched)
  uint64_t replays = 0;         // segments replayed: their recorded graph launched uncaptured
  uint64_t replay_stops = 0;    // replays stopped by an op unlike the record (then captured)
  // The op that stopped the last stopped replay (a kernel's name, "copy", ...).
  const char* last_stop = "";
};

}  // namespace flashdesk::cuda
