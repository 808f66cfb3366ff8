// One model split over several ranks of this process (`--ranks N`): a thread, a backend and a
// slice of the weights per rank (engine/model/sharding.h: heads, output groups, experts), joined by
// an all-reduce: ThreadCollective between CPU backends (the multi-device code path of the model on
// a machine without GPUs, so CI checks that a split model computes what one device computes), or
// NCCL between CUDA backends on GPUs of their own (make_nccl_collectives).
//
// Every call runs on all ranks at once with the same arguments (each rank's thread joins before
// the call returns) and answers with rank 0's result; all ranks hold the same logits. A rank that
// throws makes the call throw; the ranks throw alike on bad requests, before any all-reduce.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/model/model.h"
#include "engine/ops/thread_collective.h"

namespace flashdesk {

class RankGroup {
 public:
  using BackendMaker = std::function<std::unique_ptr<Backend>(int rank)>;
  // The collectives of the ranks' backends, one a rank in rank order; empty: ThreadCollective.
  using CollectiveMaker =
      std::function<std::vector<std::unique_ptr<Collective>>(const std::vector<Backend*>&)>;
  RankGroup(std::shared_ptr<const Checkpoint> ckpt, int ranks, const BackendMaker& make_backend,
            const ModelOptions& options = {}, const CollectiveMaker& make_collectives = {});
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int ranks() const { return static_cast<int>(ranks_.size()); }
  const ModelConfig& config() const { return ranks_.front().model->config(); }

  // A new sequence on every rank with `prompt` prefilled (replacing the earlier sequences); the
  // logits as Model::prefill gives them.
  std::vector<float> prefill(const std::vector<int32_t>& prompt, const PrefillOptions& options);
  // One token of that sequence.
  std::vector<float> decode(int32_t id);

  // A batch of new sequences (replacing the earlier ones), each prompt prefilled in turn as
  // prefill() does; each one's logits.
  std::vector<std::vector<float>> prefill_batch(const std::vector<std::vector<int32_t>>& prompts,
                                                const PrefillOptions& options);
  // One token of each sequence (ids[i] for sequence i) in one step over the batch (Model::step),
  // as a server decodes its running requests together; each one's logits.
  std::vector<std::vector<float>> decode_batch(std::span<const int32_t> ids);
  // The sequences held (prefill: one).
  size_t sequences() const { return ranks_.front().states.size(); }

  // fn(rank, its model) on every rank's thread at once, all joined (the first exception
  // rethrown): a caller's own sequence of steps on every rank, with its own observers and state
  // (the golden tests' forced block inputs and caches). The ranks must issue the same model calls
  // in the same order, as the all-reduces inside them pair up.
  void each_rank(const std::function<void(int rank, Model& model)>& fn);

 private:
  struct Rank {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Collective> comm;
    std::unique_ptr<Model> model;
    std::vector<std::unique_ptr<SequenceState>> states;
    std::vector<std::vector<float>> logits;  // a row a sequence
  };
  // fn(rank) on one thread per rank, all joined; the first exception is rethrown.
  void on_every_rank(const std::function<void(Rank&)>& fn);

  ThreadCollective::Shared shared_;
  std::vector<Rank> ranks_;
};

}  // namespace flashdesk
