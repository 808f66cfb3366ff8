// Restore + encoder bounded replay (docs/model-spec.md §3.9, docs/session-resume.md): a fresh state
// given a prefix's tokens and global KV rows, then a replay of the prefix tail, rebuilds the window
// KV and the pending compressor token without touching the restored global KV; a prefix within the
// window replays to exactly the original state.
#include <cmath>

#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

// A state holding `src`'s tokens and global KV, as a restore from the SSD block store would.
SequenceState restore_from(Model& model, const SequenceState& src) {
  SequenceState s = model.new_sequence();
  s.tokens = src.tokens;
  s.dead = src.dead;
  for (size_t l = 0; l < src.global.size(); ++l)
    if (src.global[l].entries.defined())
      restore_global_kv(model.backend(), s.global[l],
                        read_global_kv(model.backend(), src.global[l], 0, src.global[l].n_entries));
  return s;
}

std::vector<uint8_t> entry_bytes(Model& m, const SequenceState& s, int64_t layer, int64_t n) {
  return read_global_kv(m.backend(), s.global[static_cast<size_t>(layer)], 0, n).entries;
}

TEST(RestoreReplay, PrefixWithinTheWindowReplaysToTheSameState) {
  LoadedModel m = load_every_role();
  const auto ids = test_prompt(11, m.model->config().text.vocab_size, 21);  // odd: a pending token
  SequenceState a = m.model->new_sequence();
  m.model->prefill(a, ids, PrefillOptions{});
  SequenceState b = restore_from(*m.model, a);
  EXPECT_EQ(b.global[2].n_pending, 0);
  const auto lb = m.model->prefill(b, ids, PrefillOptions{PrefillMode::Exact, 0, false, 11});
  EXPECT_EQ(b.position(), 11);
  EXPECT_EQ(b.global[2].n_pending, 1);
  for (int64_t layer = 0; layer < 14; ++layer)
    EXPECT_EQ(m.model->dequantized_ring(a, layer), m.model->dequantized_ring(b, layer)) << layer;
  // Continuing from both states gives the same logits.
  EXPECT_EQ(m.model->decode(a, 7), m.model->decode(b, 7));
  (void)lb;
}

TEST(RestoreReplay, ReplayOfTheTailKeepsTheRestoredGlobalKv) {
  LoadedModel m = load_every_role();
  const TextConfig& t = m.model->config().text;
  const int64_t P = 41, W = t.sliding_window;
  const auto ids = test_prompt(P, t.vocab_size, 22);
  SequenceState a = m.model->new_sequence();
  m.model->prefill(a, ids, PrefillOptions{});
  SequenceState b = restore_from(*m.model, a);
  const std::vector<int32_t> tail(ids.end() - W, ids.end());
  const auto logits = m.model->prefill(b, tail, PrefillOptions{PrefillMode::Bounded, 0, false, W});
  ASSERT_EQ(logits.size(), static_cast<size_t>(t.vocab_size));
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  for (int64_t layer : {2, 5, 8}) {
    EXPECT_EQ(b.global[static_cast<size_t>(layer)].n_entries,
              a.global[static_cast<size_t>(layer)].n_entries);
    EXPECT_EQ(entry_bytes(*m.model, a, layer, a.global[static_cast<size_t>(layer)].n_entries),
              entry_bytes(*m.model, b, layer, b.global[static_cast<size_t>(layer)].n_entries));
  }
  EXPECT_EQ(b.global[2].n_pending, 1);  // position 40 waits for its pair again
  // Layer 0's window KV depends on the embeddings only: the replayed ring is the original one.
  EXPECT_EQ(m.model->dequantized_ring(a, 0), m.model->dequantized_ring(b, 0));
  // Decoding goes on; the restored entries stay as they were.
  m.model->decode(b, 9);
  EXPECT_EQ(entry_bytes(*m.model, a, 8, P), entry_bytes(*m.model, b, 8, P));
  EXPECT_EQ(b.global[8].n_entries, P + 1);
  EXPECT_EQ(b.global[2].n_entries, (P + 1) / 2);
}

TEST(RestoreReplay, ReplayMustRepeatTheStatesOwnTokens) {
  LoadedModel m = load_every_role();
  const auto ids = test_prompt(8, m.model->config().text.vocab_size, 23);
  SequenceState a = m.model->new_sequence();
  m.model->prefill(a, ids, PrefillOptions{});
  std::vector<int32_t> wrong(ids.end() - 4, ids.end());
  wrong[1] ^= 1;
  EXPECT_THROW(m.model->prefill(a, wrong, PrefillOptions{PrefillMode::Exact, 0, false, 4}),
               InvalidRequest);
  EXPECT_THROW(m.model->prefill(a, ids, PrefillOptions{PrefillMode::Exact, 0, false, 9}),
               InvalidRequest);
  EXPECT_EQ(a.position(), 8);
  // A restore whose replay does not reach back to the end of the restored global KV.
  SequenceState b = restore_from(*m.model, a);  // 8 tokens, 4 entries at m = 2, none pending
  b.global[2].n_entries = 3;                    // as if one entry had not been persisted
  const std::vector<int32_t> tail(ids.end() - 1, ids.end());
  EXPECT_THROW(m.model->prefill(b, tail, PrefillOptions{PrefillMode::Exact, 0, false, 1}),
               InvalidRequest);
}

}  // namespace
}  // namespace flashdesk::test
