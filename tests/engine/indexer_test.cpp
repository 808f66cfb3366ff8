// The indexer of every backend against hand-computed scores: ReLU-weighted head sums, top-k
// with lower-entry-first ties, -1 for entries not yet visible, candidate blocks (forced newest
// block, -inf blocks dropped) and the candidate restriction of Reindex layers.
#include <vector>

#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

class IndexerTest : public BackendTest {
 protected:
  static constexpr int64_t kDim = 32, kEntries = 6;

  void SetUp() override {
    BackendTest::SetUp();
    // Key s is the unit vector e_s (exact in FP4: amax 1 -> scale 1/4, 1.0 -> code 4.0).
    std::vector<float> k(kEntries * kDim, 0.0f);
    for (int64_t s = 0; s < kEntries; ++s) k[s * kDim + s] = 1.0f;
    keys_ = be().alloc(DType::U8, Shape{8, kv_row_bytes(KvFormat::Fp4Key, kDim)});
    be().quantize_rows(KvFormat::Fp4Key, f32(Shape{kEntries, kDim}, k), keys_, 0);
    // Head 0 reads a = [1, 2, 3, -1, 0.5, 4], head 1 reads b = 4 at entry 3; weights [1, 0.5]:
    // scores [1, 2, 3, 2, 0.5, 4] (entry 3: relu(-1) + 0.5 * 4 = 2, tied with entry 1).
    std::vector<float> q(2 * kDim, 0.0f);
    const float a[] = {1, 2, 3, -1, 0.5f, 4};
    for (int s = 0; s < 6; ++s) q[s] = a[s];
    q[kDim + 3] = 4.0f;
    q_ = f32(Shape{1, 2, kDim}, q);
    w_ = f32(Shape{1, 2}, {1.0f, 0.5f});
  }

  std::vector<int32_t> run(int64_t visible, int64_t k, const Tensor* restrict_blocks = nullptr,
                           int64_t n_candidates = 0, std::vector<int32_t>* cand_out = nullptr) {
    const std::vector<int64_t> vis = {visible};
    IndexerArgs args;
    args.q = &q_;
    args.weights = &w_;
    args.n_visible = vis;
    args.keys = EntryCache{&keys_, kEntries};
    args.restrict_blocks = restrict_blocks;
    args.block_size = 2;
    Tensor topk = be().alloc(DType::I32, Shape{1, k});
    Tensor cand = be().alloc(DType::I32, Shape{1, std::max<int64_t>(n_candidates, 1)});
    be().indexer_select(args, topk, n_candidates ? &cand : nullptr);
    if (cand_out) *cand_out = host<int32_t>(cand);
    return host<int32_t>(topk);
  }

  Tensor keys_, q_, w_;
};

TEST_P(IndexerTest, TopKBreaksTiesTowardTheLowerEntryAndSortsByPosition) {
  // Best: entry 2 (3.0), then entries 1 and 3 tie at 2.0 (entry 5 scores 4 but is not visible).
  EXPECT_EQ(run(5, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(run(5, 3), (std::vector<int32_t>{1, 2, 3}));
}

TEST_P(IndexerTest, EntriesNotYetVisibleArePublishedAsMinusOne) {
  EXPECT_EQ(run(5, 6), (std::vector<int32_t>{0, 1, 2, 3, 4, -1}));
  EXPECT_EQ(run(6, 1), (std::vector<int32_t>{5}));
}

TEST_P(IndexerTest, CandidateBlocksForceTheNewestBlockAndDropEmptyOnes) {
  std::vector<int32_t> cand;
  // Blocks of 2: scores {1,2}=2, {3,2}=3, {0.5,-inf} forced (holds entry 4 = newest visible).
  run(5, 3, nullptr, 2, &cand);
  EXPECT_EQ(cand, (std::vector<int32_t>{1, 2}));
  // Only entry 0 visible: block 0 forced, blocks 1 and 2 are all -inf and dropped.
  run(1, 3, nullptr, 2, &cand);
  EXPECT_EQ(cand, (std::vector<int32_t>{0, -1}));
}

TEST_P(IndexerTest, RestrictionScoresOtherEntriesMinusInfinity) {
  Tensor blocks = make(DType::I32, Shape{1, 2}, std::vector<int32_t>{1, -1});  // entries 2, 3
  // Entries 2 and 3 score; the third slot goes to the lowest -inf entry (0), still visible.
  EXPECT_EQ(run(5, 3, &blocks), (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(run(5, 2, &blocks), (std::vector<int32_t>{2, 3}));
}

FD_BACKEND_TEST_SUITE(IndexerTest);

}  // namespace
}  // namespace flashdesk::test
