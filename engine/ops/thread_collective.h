// An all-reduce among the threads of one process: the ranks of a model split over several CPU
// backends (engine/runtime/rank_group.h), so the multi-device code runs without GPUs, in CI.
// Every rank posts its tensor, every rank sums all of them in rank order (so all ranks end with
// the same bits), and nobody leaves before everyone has read.
#pragma once

#include <barrier>
#include <vector>

#include "engine/ops/collective.h"

namespace flashdesk {

class ThreadCollective final : public Collective {
 public:
  // What the ranks of one group share; outlives their collectives.
  struct Shared {
    explicit Shared(int world);
    int world;
    std::vector<const float*> posted;
    std::barrier<> sync;
  };
  ThreadCollective(Shared& shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return shared_.world; }
  // Host-memory F32 tensors of the same size on every rank (CPU backends).
  void all_reduce_sum(Tensor& t) override;

 private:
  Shared& shared_;
  int rank_;
};

}  // namespace flashdesk
