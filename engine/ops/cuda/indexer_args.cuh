// The indexer kernels' shared view of one call (indexer.cu: the CUDA-core scores and the
// selection; indexer_tc.cu: the scores of prefill-sized calls on the tensor cores), and the
// tensor-core scores' entry points.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/device_context.h"

namespace flashdesk::cuda {

struct IdxArgs {
  const float* q;        // [n, heads, dim]
  const float* weights;  // [n, heads]
  const int64_t* visible;
  const uint8_t* keys;     // Fp4Key rows
  const uint8_t* allowed;  // [n, n_blocks] or null
  int64_t n, heads, dim, entries, block_size, n_blocks;
  int64_t width;  // the row the selection is over: >= entries, the rest -inf
  // Inside a step graph: [entries, width, n_blocks] in device memory, which replace the fields
  // above; those then hold a bucket's sizes (grids, shared memory and scratch are sized for them),
  // so that the steps of a bucket launch the same kernels with the same parameters, which a
  // recorded step graph replays (step_graph.h). Null elsewhere.
  const int64_t* sizes;
};

// The call's sizes as the kernels use them (`a.sizes`'s where set).
__device__ inline IdxArgs sized(IdxArgs a) {
  if (a.sizes) {
    a.entries = a.sizes[0];
    a.width = a.sizes[1];
    a.n_blocks = a.sizes[2];
  }
  return a;
}

// Whether indexer_scores_tc takes the call: a head dim of 64 or 128, at most 64 heads.
bool indexer_scores_tc_fits(const IdxArgs& a);

// scores[n, width] as the CUDA-core kernel writes them, to the bit (indexer_tc.cu says why);
// decoded_keys: the keys decoded once for the call rather than by every CTA that reads them
// (CudaBackend::set_index_keys_decoded).
void indexer_scores_tc(DeviceContext& ctx, const IdxArgs& a, float* scores, bool decoded_keys);

}  // namespace flashdesk::cuda
