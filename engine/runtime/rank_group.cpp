// Ranks of one model in threads of this process (rank_group.h).
#include "engine/runtime/rank_group.h"

#include <exception>
#include <mutex>
#include <thread>

#include "engine/util/error.h"

namespace flashdesk {

RankGroup::RankGroup(std::shared_ptr<const Checkpoint> ckpt, int ranks,
                     const BackendMaker& make_backend, const ModelOptions& options,
                     const CollectiveMaker& make_collectives)
    : shared_(ranks) {
  if (ranks < 1 || ranks > 64)
    throw InvalidRequest("ranks: expected 1-64, got " + std::to_string(ranks));
  ranks_.resize(static_cast<size_t>(ranks));
  std::vector<Backend*> backends;
  for (Rank& rank : ranks_) {
    rank.backend = make_backend(static_cast<int>(backends.size()));
    backends.push_back(rank.backend.get());
  }
  std::vector<std::unique_ptr<Collective>> comms;
  if (make_collectives) {
    comms = make_collectives(backends);
    FD_CHECK(comms.size() == ranks_.size(), "RankGroup: one collective a rank");
  }
  for (int r = 0; r < ranks; ++r) {
    std::unique_ptr<Collective>& comm = ranks_[static_cast<size_t>(r)].comm;
    if (make_collectives)
      comm = std::move(comms[static_cast<size_t>(r)]);
    else
      comm = std::make_unique<ThreadCollective>(shared_, r);
  }
  // Each rank loads its own slice; in parallel, as a multi-GPU load would.
  on_every_rank([&](Rank& rank) {
    rank.model = std::make_unique<Model>(ckpt, *rank.backend, options, rank.comm.get());
  });
}

RankGroup::~RankGroup() = default;

void RankGroup::on_every_rank(const std::function<void(Rank&)>& fn) {
  std::mutex failed_mutex;
  std::exception_ptr failed;
  std::vector<std::thread> threads;
  threads.reserve(ranks_.size());
  for (Rank& rank : ranks_)
    threads.emplace_back([&, r = &rank] {
      try {
        fn(*r);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failed_mutex);
        if (!failed) failed = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  if (failed) std::rethrow_exception(failed);
}

void RankGroup::each_rank(const std::function<void(int rank, Model& model)>& fn) {
  on_every_rank([&](Rank& rank) { fn(static_cast<int>(&rank - ranks_.data()), *rank.model); });
}

std::vector<float> RankGroup::prefill(const std::vector<int32_t>& prompt,
                                      const PrefillOptions& options) {
  return std::move(prefill_batch({prompt}, options).front());
}

std::vector<float> RankGroup::decode(int32_t id) {
  if (sequences() != 1)
    throw InvalidRequest(sequences() == 0 ? std::string("RankGroup::decode before prefill")
                                          : "RankGroup::decode: one sequence (prefill), not a "
                                            "batch of " +
                                                std::to_string(sequences()));
  return std::move(decode_batch(std::span<const int32_t>(&id, 1)).front());
}

std::vector<std::vector<float>> RankGroup::prefill_batch(
    const std::vector<std::vector<int32_t>>& prompts, const PrefillOptions& options) {
  if (prompts.empty()) throw InvalidRequest("RankGroup: a batch of no prompts");
  on_every_rank([&](Rank& rank) {
    rank.states.clear();
    rank.logits.clear();
    for (const std::vector<int32_t>& prompt : prompts) {
      rank.states.push_back(std::make_unique<SequenceState>(rank.model->new_sequence()));
      rank.logits.push_back(rank.model->prefill(*rank.states.back(), prompt, options));
    }
  });
  return ranks_.front().logits;
}

std::vector<std::vector<float>> RankGroup::decode_batch(std::span<const int32_t> ids) {
  if (ids.size() != sequences())
    throw InvalidRequest("RankGroup: " + std::to_string(ids.size()) + " ids for " +
                         std::to_string(sequences()) + " sequences");
  on_every_rank([&](Rank& rank) {
    std::vector<SequenceStep> steps(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      steps[i].state = rank.states[i].get();
      steps[i].tokens = ids.subspan(i, 1);
    }
    rank.model->step(steps);
    for (size_t i = 0; i < ids.size(); ++i) rank.logits[i] = std::move(steps[i].out_logits);
  });
  return ranks_.front().logits;
}

}  // namespace flashdesk
