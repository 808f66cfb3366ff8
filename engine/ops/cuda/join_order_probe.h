// Beside-lane sections as the model makes them (a writer on one stream, kernels on the other that
// read what it wrote after a fork or a join), with one writer made slow, so that a test can check
// that every reader waits for what it reads: in step graphs, kernels after event waits launched
// with the overlap did not (launch_overlap.h note_event_wait).
#pragma once

#include <cstdint>

namespace flashdesk {
class CudaBackend;

enum class JoinShape {
  // A writer on the lane beside a writer on the main stream, the join, then a reader of both on
  // the main stream; the main stream's writer slow.
  JoinSlowMain,
  // The same with the lane's writer slow.
  JoinSlowLane,
  // A slow writer on the main stream, then two lane sections: the first writes a constant, the
  // second copies the slow writer's values (after its own fork); joined, then a reader of both
  // (the model's mixes, then the KV path, both beside the query).
  SecondSectionSlowMain,
  // A slow writer on the main stream, then one lane section that copies its values, a writer on
  // the main stream beside it, the join and a reader of both.
  FirstSectionSlowMain,
  // JoinSlowMain with a decode boundary's reader: one block, which loads data no kernel of the
  // step writes before its wait (as hc_collapse_norm_kernel's L2 prefetch of its norm weights
  // did when the goldens' step graphs went wrong).
  JoinSlowMainOneBlockReader,
};

// `rounds` rounds of the shape, as a step graph if `graph`: the count of values the last reader
// got wrong, over all rounds. A slow writer's blocks wait about 20 µs before they write.
int64_t join_order_probe_wrong_values(CudaBackend& be, JoinShape shape, bool graph, int rounds);

}  // namespace flashdesk
