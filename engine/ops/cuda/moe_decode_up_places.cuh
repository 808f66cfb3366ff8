// The decode experts' up kernel over the places (moe_decode_up_places.cu): a grid of as many
// blocks as the multiprocessors hold at once, each block taking an equal share of the step's K
// units, cut across tile pairs and slots, where the kernel over tiles (moe_decode_tc.cu) runs a
// block a tile pair and slot part (V4.1's one-row step: 576 blocks on 528 places, 1.09 waves, the
// last 48 blocks alone with only their own copies in flight).
#pragma once

#include <cstdint>
#include <span>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/moe_slots.cuh"
#include "engine/ops/cuda/no_padding.h"
#include "engine/ops/cuda/tc_codes.cuh"

namespace flashdesk::cuda {

// The K units (64 bytes of each of a tile's rows) of a routed slot's and of the shared slot's
// gate and up rows; routed 0 where the present routed experts' differ (the kernel over tiles then
// runs).
FD_NO_PADDING_BEGIN
struct UpUnits {
  int64_t routed = 0, shared = 0;
};
FD_NO_PADDING_END
// Of the host's copy of the experts' table (entries [0, n_routed], the shared expert last, absent
// ones null), whose every present expert decode_experts_tc_fit takes.
UpUnits up_units_of(std::span<const ExpertEntry> table, int64_t n_routed);

// The plan of a step's up kernel over the places. A row's units are its routed slots' tile pairs
// in slot order, then its shared slot's (where the grid has it), each a segment of its slot's K
// units; block b takes units [b total / blocks, (b + 1) total / blocks). A segment cut between
// blocks leaves each piece's sums in `partial`, and the last piece to arrive adds them in piece
// order: the grid is fixed by the shapes, so the sums' order is too.
FD_NO_PADDING_BEGIN
struct UpPlaces {
  int64_t cols;        // slots a row in the grid: the k routed, then the shared one where it is
  int64_t pairs;       // tile pairs a slot (32 rows of max_inter)
  UpUnits units;       // a segment's K units, routed and shared
  int64_t row_units;   // pairs (k routed + shared)
  int64_t total;       // n row_units
  int64_t max_pieces;  // the most blocks a segment is cut between
  int64_t blocks;
  float* partial;  // [segments, max_pieces, 2, 32] pieces' sums
  unsigned* done;  // [segments] arrival counters, zero
};
FD_NO_PADDING_END

// The plan for `a` (x's rows in_stride values; as many blocks as ctx's multiprocessors hold)
// without its buffers: the caller sets partial (up_places_partial floats) and done
// (up_places_segments counters).
UpPlaces plan_up_places(const DeviceContext& ctx, const SlotArgs& a, UpUnits units, int64_t pairs,
                        int64_t in_stride);
inline int64_t up_places_segments(const SlotArgs& a, const UpPlaces& p) {
  return a.n * p.cols * p.pairs;
}
inline int64_t up_places_partial(const SlotArgs& a, const UpPlaces& p) {
  return up_places_segments(a, p) * p.max_pieces * 2 * 32;
}

// The up kernel's work (expert_tc_kernel<up>'s: h[slot] for every slot of `a`) over the places:
// x's act_quant'ed rows (in_stride values each) into h (rows of h_stride values).
void launch_up_places(DeviceContext& ctx, const SlotArgs& a, const UpPlaces& p, TcActs x,
                      int64_t in_stride, TcActs h, int64_t h_stride);

}  // namespace flashdesk::cuda
