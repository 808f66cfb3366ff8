// The compressor and the indexer beside the query's projections (Backend::indexer_beside_query;
// the CUDA backend's opt-in at decode sizes) on the CPU: a backend that asks for them runs the
// same ops in another order, in beside sections of their own, so the every-role model's logits
// are those of the in-place order to the bit. The first decode step after an 80-token prompt
// grows the ratio-1 layers' caches, which the model reserves before the section. (The CUDA
// backend's own run of this, on its beside lane:
// StepGraphs.IndexerBesideTheQueryGivesTheLogitsOfInPlace.)
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

// The CPU reference backend asking for the indexer beside the query at up to `rows` rows, and
// counting the beside sections the model opens.
class BesideIndexerBackend final : public CpuReferenceBackend {
 public:
  explicit BesideIndexerBackend(int64_t rows) : CpuReferenceBackend(2), rows_(rows) {}
  bool indexer_beside_query(int64_t rows) const override { return rows <= rows_; }
  void beside_begin() override { ++sections_; }
  int64_t sections() const { return sections_; }

 private:
  int64_t rows_;
  int64_t sections_ = 0;
};

constexpr int kPrompt = 80, kSteps = 6;

// The prompt's logits, then each decode step's.
std::vector<std::vector<float>> run(Backend& be) {
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(every_role_model_dir());
  const auto ids = test_prompt(kPrompt + kSteps, ckpt->config().text.vocab_size, 11);
  Model m(ckpt, be, ModelOptions{});
  SequenceState s = m.new_sequence();
  std::vector<std::vector<float>> out;
  out.push_back(m.prefill(s, std::span(ids).first(kPrompt), PrefillOptions{}));
  for (int i = 0; i < kSteps; ++i) out.push_back(m.decode(s, ids[kPrompt + i]));
  return out;
}

TEST(IndexerBeside, TheLogitsOfTheInPlaceOrderToTheBit) {
  BesideIndexerBackend in_place(0), beside(8);
  const auto want = run(in_place);
  const auto got = run(beside);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].size(), got[i].size());
    EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)), 0)
        << "step " << i;
  }
  // A section of its own for each indexer a decode step runs (the prefill's 80 rows keep the
  // in-place order): more sections than in place, as many more in every step.
  const int64_t indexers = [&] {
    std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(every_role_model_dir());
    Model m(ckpt, in_place, ModelOptions{});
    int64_t n = 0;
    for (const LayerRole& r : m.roles()) n += r.index_source == r.layer ? 1 : 0;
    return n;
  }();
  ASSERT_GT(indexers, 0);
  EXPECT_EQ(beside.sections() - in_place.sections(), indexers * kSteps);
}

}  // namespace
}  // namespace flashdesk::test
