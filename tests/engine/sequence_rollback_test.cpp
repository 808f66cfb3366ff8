// Rolling back the last rows of a step (engine/model/sequence_rollback.h) on both CPU backends:
// decode k rows in one step, roll back all but j of them, continue; the logits equal, bit for bit,
// those of a sequence that only ever ran the j rows.
#include <string>

#include "engine/model/sequence_rollback.h"
#include "engine/runtime/backend_factory.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

using Ids = std::vector<int32_t>;

class SequenceRollbackTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = make_backend(GetParam(), 2);
    model_ = std::make_unique<Model>(Checkpoint::open(every_role_model_dir()), *backend_);
  }
  int64_t vocab() { return model_->config().text.vocab_size; }

  void run(SequenceState& s, const Ids& ids) {
    SequenceStep step;
    step.state = &s;
    step.tokens = ids;
    step.logits = LogitsWanted::All;
    model_->step(std::span<SequenceStep>(&step, 1));
  }

  // Logits of each continuation token decoded one by one.
  std::vector<float> continue_with(SequenceState& s, const Ids& ids) {
    std::vector<float> out;
    for (int32_t id : ids) {
      std::vector<float> l = model_->decode(s, id);
      out.insert(out.end(), l.begin(), l.end());
    }
    return out;
  }

  void check(int64_t prompt_len, int64_t k, int64_t keep) {
    SCOPED_TRACE("prompt " + std::to_string(prompt_len) + ", " + std::to_string(k) +
                 " rows, keep " + std::to_string(keep));
    const Ids prompt = test_prompt(prompt_len, vocab(), 11);
    const Ids rows = test_prompt(k, vocab(), 12), next = test_prompt(4, vocab(), 13);
    const Ids kept(rows.begin(), rows.begin() + keep);

    SequenceState rolled = model_->new_sequence();
    model_->prefill(rolled, prompt, {});
    begin_rollback(*backend_, rolled);
    run(rolled, rows);
    roll_back(*backend_, rolled, prompt_len + keep);
    EXPECT_FALSE(rolled.rollback.has_value());

    SequenceState plain = model_->new_sequence();
    model_->prefill(plain, prompt, {});
    if (keep > 0) run(plain, kept);

    ASSERT_EQ(rolled.tokens, plain.tokens);
    for (size_t l = 0; l < plain.global.size(); ++l) {
      EXPECT_EQ(rolled.global[l].n_entries, plain.global[l].n_entries) << "layer " << l;
      EXPECT_EQ(rolled.global[l].n_pending, plain.global[l].n_pending) << "layer " << l;
      EXPECT_EQ(rolled.rings[l].positions, plain.rings[l].positions) << "layer " << l;
    }
    EXPECT_EQ(continue_with(rolled, next), continue_with(plain, next));
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_P(SequenceRollbackTest, ContinuesAsIfTheRejectedRowsNeverRan) {
  // Odd and even starts: the ratio-2 groups split differently around the kept rows; 21 > W = 16,
  // so the rows overwrite ring slots holding older positions.
  for (int64_t prompt_len : {21, 22})
    for (int64_t keep = 0; keep <= 6; ++keep) check(prompt_len, 6, keep);
}

TEST_P(SequenceRollbackTest, CommitKeepsEverything) {
  const Ids prompt = test_prompt(9, vocab(), 14), rows = test_prompt(3, vocab(), 15);
  SequenceState s = model_->new_sequence();
  model_->prefill(s, prompt, {});
  begin_rollback(*backend_, s);
  run(s, rows);
  commit_rollback(s);
  EXPECT_FALSE(s.rollback.has_value());
  EXPECT_EQ(s.position(), 12);
  EXPECT_THROW(roll_back(*backend_, s, 10), std::exception);  // nothing to roll back any more
}

INSTANTIATE_TEST_SUITE_P(BothCpuBackends, SequenceRollbackTest,
                         ::testing::Values("cpu-reference", "cpu"));

}  // namespace
}  // namespace flashdesk::test
