// One V4.1 main layer at full shapes on the CUDA backend, for bench/cuda_layer_bench: random
// weights and caches generated on the device, and the backend calls of one step of the layer in
// the order StepRunner::run_block, attention_layer.cpp and ffn_layer.cpp make them (mHC mixes,
// collapse + norm, attention with its role's compressor / indexer / top-k reuse, the grouped
// output projection, MoE routing and experts, expansions).
//
// Why not Model on a make-random checkpoint: one layer of each role at full shapes is 54 GB of
// weights (384 experts x 7 GB per layer), more than one benchmark call can write, read and
// upload; on the device the same shapes are filled in milliseconds. The call sequence here must
// follow the model's: a change there is a change here (the bench prints the kernels per layer,
// which shows a drift).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/score_ties.h"
#include "engine/checkpoint/config.h"
#include "engine/ops/cuda/cuda_backend.h"

namespace flashdesk::bench {

// Device bytes one decode step reads, split as the roofline needs them.
struct StepBytes {
  double fixed = 0;    // every weight but the routed experts (read by any step)
  double experts = 0;  // the routed experts the step's rows selected (distinct)
  double caches = 0;   // window ring, top-k entries, scanned index keys
  double total() const { return fixed + experts + caches; }
};

class SyntheticLayer {
 public:
  // Layer `role` of `text` with `seqs` sequences whose caches hold `context` positions.
  // host_experts: the routed experts are random bytes in host memory, uploaded as the hybrid
  // placement leaves them (the backend computes them on the CPU, docs/placement.md).
  SyntheticLayer(CudaBackend& be, const TextConfig& text, const LayerRole& role, int64_t seqs,
                 int64_t context, uint64_t seed, bool host_experts = false);
  ~SyntheticLayer();

  // One decode step (one new token per sequence at position `context`) on input set `input`
  // (of 4, rotated so routing and L2 contents change between steps). Caches are not advanced:
  // every step sees the same context.
  void decode(int input);
  // One prefill step of `tokens` tokens of one sequence from position 0 (empty caches). The
  // first call of a token count makes the caches and inputs (random fills, and a Reuse or Reindex
  // layer's ids drawn on the host: tens of ms that are not the layer's); later calls only reset
  // their positions, so a timed call after a warm-up times the layer alone.
  void prefill(int64_t tokens);
  // Bytes a decode step on input set `input` reads (reads the routed ids back: not timed).
  StepBytes decode_bytes(int input);
  // What index_probe finds about the first sequence's indexer row.
  struct IndexProbe {
    KthTie tie;  // at the k-th best score (equal 0: no indexer)
    // The indexer's op (scores and selection) and its scores alone, run again on the step's own
    // arguments with nothing beside them (medians of `reps`, device µs): the selection's cost
    // on this layer's rows apart from what runs beside it in the step.
    double op_us = 0, scores_us = 0;
    std::vector<float> row;  // the score row
  };
  // A decode step on input set `input` whose indexer reads its first sequence's score row back
  // (not timed; the tie is the one the selection resolves with torch's steps) and, with reps > 0,
  // times its indexer op alone.
  IndexProbe index_probe(int input, int64_t reps);
  // The step's weight-streaming kernels alone, in the step's order and on its streams (wkv
  // beside wq_a and wq_b, then wo_a, wo_b, the gate and the experts on input set `input`'s own
  // routing), with none of the kernels between them (mixes, norms, RoPE, quantisations, the
  // attention, the router, the boundaries): what the step's device time would be if those cost
  // nothing, a bound on what fusing them can gain. The compressor's and indexer's linears are
  // left out (the Full and Reindex layers' rows are the main path's only). The first call routes
  // the four input sets (not to be timed).
  void decode_weights_only(int input);
  // The bytes decode_weights_only reads on input set `input` (its weights, the distinct routed
  // experts of its rows).
  double weights_only_bytes(int input);
  // FLOPs of a prefill of `tokens` tokens (matrix products, expert products, attention).
  double prefill_flops(int64_t tokens) const;

 private:
  struct Weights;
  struct SeqCache;
  // u: X's attention input (attn_in_, prefill_u_).
  Tensor step(const Tensor& X, const Tensor& u, std::span<const int64_t> positions,
              std::vector<SeqCache*>& seqs, int64_t first_position, bool prefill);
  // after_sections: called once the beside sections it joins are issued (BesideWork).
  Tensor attention(const Tensor& x, std::span<const int64_t> positions,
                   std::vector<SeqCache*>& seqs, int64_t first_position, bool prefill,
                   const std::function<void()>& after_sections);
  void compress(const Tensor& x, std::vector<SeqCache*>& seqs, int64_t first_position);
  std::vector<Tensor> index(const Tensor& qr, const Tensor& x, std::span<const int64_t> positions,
                            std::vector<SeqCache*>& seqs, int64_t first_position,
                            std::vector<Tensor>& candidates);
  Tensor moe(const Tensor& x, Tensor* ids_out);
  // The gate and the router of rows x (as moe() runs them): ids and weights [rows, k].
  void route(const Tensor& x, Tensor& ids, Tensor& weights);
  // The distinct experts the rows of `ids` chose (read back: not to be timed).
  size_t distinct_experts(const Tensor& ids);
  // index(): fills probe_ from the first sequence's indexer arguments, after its selection.
  void probe_row(const IndexerArgs& a, Tensor& topk, Tensor& candidates, int64_t entries);
  std::unique_ptr<SeqCache> make_cache(int64_t context, int64_t rows, uint64_t seed);
  // decode_weights_only's routing of each input set (ids, weights) and its attention output.
  void route_for_weights_only();
  std::vector<Tensor> wo_ids_, wo_weights_;
  std::vector<double> wo_bytes_;
  Tensor wo_heads_;
  IndexProbe* probe_ = nullptr;  // index_probe: what index() finds about the first row
  int64_t probe_reps_ = 0;

  CudaBackend& be_;
  const TextConfig& t_;
  LayerRole role_;
  int64_t seqs_, context_;
  std::unique_ptr<Weights> w_;
  std::vector<std::unique_ptr<SeqCache>> caches_;
  std::unique_ptr<SeqCache> prefill_cache_;  // prefill()'s, for prefill_tokens_ tokens
  int64_t prefill_tokens_ = 0;
  Tensor prefill_x_, prefill_pre_;
  std::vector<Tensor> inputs_, pre_in_;  // 4 input sets [seqs, hc, D] and the incoming pre
  // Their attention inputs, which in a model the previous block's last op makes
  // (StepRunner::next_attn_input_): made once, outside the timed steps.
  std::vector<Tensor> attn_in_;
  Tensor prefill_u_;
  std::vector<float> inv_freq_;
};

}  // namespace flashdesk::bench
