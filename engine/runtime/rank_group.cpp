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

std::vector<float> RankGroup::prefill(const std::vector<int32_t>& prompt,
                                      const PrefillOptions& options) {
  on_every_rank([&](Rank& rank) {
    rank.state = std::make_unique<SequenceState>(rank.model->new_sequence());
    rank.logits = rank.model->prefill(*rank.state, prompt, options);
  });
  return ranks_.front().logits;
}

std::vector<float> RankGroup::decode(int32_t id) {
  FD_CHECK(ranks_.front().state != nullptr, "RankGroup::decode before prefill");
  on_every_rank([&](Rank& rank) { rank.logits = rank.model->decode(*rank.state, id); });
  return ranks_.front().logits;
}

}  // namespace flashdesk
