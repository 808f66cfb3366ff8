// The multi-device split described by the sharding table, run in one process: two ranks (threads),
// each with its own CPU backend and its slice of the weights (heads, output groups, experts),
// joined by an in-process all-reduce. The model code is the single-device code; the logits match
// the single-device model up to the FP32 order of the reductions.
#include <barrier>
#include <thread>

#include "engine/ops/collective.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

// All-reduce among threads: each rank posts its tensor, every rank sums them in rank order.
class ThreadCollective final : public Collective {
 public:
  struct Shared {
    explicit Shared(int world) : world(world), posted(static_cast<size_t>(world)), sync(world) {}
    int world;
    std::vector<const float*> posted;
    std::barrier<> sync;
  };
  ThreadCollective(Shared& shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return shared_.world; }
  void all_reduce_sum(Tensor& t) override {
    const int64_t n = t.numel();
    shared_.posted[static_cast<size_t>(rank_)] = t.data<float>();
    shared_.sync.arrive_and_wait();
    std::vector<float> sum(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < shared_.world; ++r)
      for (int64_t i = 0; i < n; ++i)
        sum[static_cast<size_t>(i)] += shared_.posted[static_cast<size_t>(r)][i];
    shared_.sync.arrive_and_wait();  // everyone has read every rank's tensor
    std::copy(sum.begin(), sum.end(), t.data<float>());
    shared_.sync.arrive_and_wait();
  }

 private:
  Shared& shared_;
  int rank_;
};

TEST(ShardedModel, TwoRanksMatchOneDevice) {
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(every_role_model_dir());
  const auto ids = test_prompt(24, ckpt->config().text.vocab_size, 11);
  CpuReferenceBackend one_be(1);
  Model one(ckpt, one_be);
  SequenceState s = one.new_sequence();
  const auto want = one.prefill(s, ids, PrefillOptions{});
  const auto want_next = one.decode(s, ids[3]);

  ThreadCollective::Shared shared(2);
  std::vector<std::vector<float>> got(2), got_next(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      CpuReferenceBackend be(1);
      ThreadCollective comm(shared, r);
      Model part(ckpt, be, ModelOptions{}, &comm);
      SequenceState st = part.new_sequence();
      got[static_cast<size_t>(r)] = part.prefill(st, ids, PrefillOptions{});
      got_next[static_cast<size_t>(r)] = part.decode(st, ids[3]);
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(got[0], got[1]);  // every rank ends with the same logits
  // Partial sums add in another order before the BF16 rounding: about one BF16 ulp of drift
  // per affected value, far below the logits' spread.
  EXPECT_LE(max_abs_diff(got[0], want), 0.02 * max_abs(want));
  EXPECT_LE(max_abs_diff(got_next[0], want_next), 0.02 * max_abs(want_next));
}

}  // namespace
}  // namespace flashdesk::test
