// Every CSA2 role takes its path: index sources publish top-k over their KV source's entries
// (ascending, -1 only for entries not yet visible), the candidate source publishes candidate
// blocks, Reindex layers select only inside those blocks, Reuse and window-only layers publish
// nothing; caches hold the documented byte sizes.
#include <map>
#include <set>

#include "engine/ops/kv_format.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

class RoleRecorder : public ForwardObserver {
 public:
  void on_topk(int64_t layer, std::span<const RowInfo> rows, const HostTensor& t) override {
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t k = t.shape[1];
      auto v = t.as<int32_t>();
      topk[layer][rows[i].position] = std::vector<int32_t>(
          v.begin() + static_cast<int64_t>(i) * k, v.begin() + static_cast<int64_t>(i + 1) * k);
    }
  }
  void on_candidates(int64_t layer, std::span<const RowInfo> rows, const HostTensor& b,
                     int64_t block_size, int64_t) override {
    bs = block_size;
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t c = b.shape[1];
      auto v = b.as<int32_t>();
      cand[layer][rows[i].position] = std::vector<int32_t>(
          v.begin() + static_cast<int64_t>(i) * c, v.begin() + static_cast<int64_t>(i + 1) * c);
    }
  }
  std::map<int64_t, std::map<int64_t, std::vector<int32_t>>> topk, cand;
  int64_t bs = 1;
};

TEST(LayerRolesForward, EachRoleTakesItsPath) {
  LoadedModel m = load_every_role();
  const TextConfig& t = m.model->config().text;
  const int64_t P = 60;
  SequenceState s = m.model->new_sequence();
  RoleRecorder rec;
  m.model->prefill(s, test_prompt(P, t.vocab_size, 9), PrefillOptions{}, &rec);
  std::set<int64_t> indexed;
  for (const auto& [layer, rows] : rec.topk) indexed.insert(layer);
  EXPECT_EQ(indexed, (std::set<int64_t>{2, 5, 8, 10, 12}));  // index_source_layer_ids
  ASSERT_EQ(rec.cand.size(), 1u);
  ASSERT_EQ(rec.cand.begin()->first, 8);  // candidate_source_layer_id
  for (const auto& [layer, rows] : rec.topk) {
    const LayerRole& r = m.model->roles()[static_cast<size_t>(layer)];
    for (const auto& [pos, ids] : rows) {
      const int64_t visible = (pos + 1) / r.compress_ratio;
      int32_t prev = -1;
      bool tail = false;
      for (int32_t e : ids) {
        if (e < 0) {
          tail = true;
          continue;
        }
        EXPECT_FALSE(tail) << "valid entry after -1 at layer " << layer;
        EXPECT_LT(e, visible);
        EXPECT_GT(e, prev);
        prev = e;
        if (r.role == AttnRole::Reindex) {  // inside the candidate source's blocks
          const auto& blocks = rec.cand.at(8).at(pos);
          EXPECT_NE(std::find(blocks.begin(), blocks.end(), e / rec.bs), blocks.end())
              << "layer " << layer << " pos " << pos << " entry " << e;
        }
      }
      // All visible entries fit: every one is selected.
      if (visible <= t.index_topk && r.role != AttnRole::Reindex) {
        EXPECT_EQ(std::count_if(ids.begin(), ids.end(), [](int32_t e) { return e >= 0; }), visible);
      }
    }
  }
  // Cache rows: FP8 window 128 + 4 B, FP4 entries 64 + 8 B, FP4 keys 32 + 2 B at this config.
  EXPECT_EQ(s.rings[0].rows.dim(1), 132);
  EXPECT_EQ(s.global[2].entries.dim(1), 72);
  EXPECT_EQ(s.global[2].index_keys.dim(1), 34);
  EXPECT_EQ(s.global[2].n_entries, P / 2);
  EXPECT_EQ(s.global[8].n_entries, P);
  EXPECT_EQ(s.global_bytes(), (2 * (P / 2) + P) * (72 + 34));  // layers 2, 5 (m = 2) and 8
}

}  // namespace
}  // namespace flashdesk::test
