// Cutting a live sequence back to a prefix (engine/model/sequence_cut.h) on both CPU backends,
// bit for bit: a cut to a window mark continues exactly like a fresh run of the prefix (computed
// as part of the same prompt) followed by the same tokens; a bounded cut anywhere continues exactly like a restore of the
// prefix from its global KV rows (what a restart reads from the SSD) followed by the same replay.
#include <algorithm>
#include <string>

#include "engine/model/sequence_cut.h"
#include "engine/runtime/backend_factory.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

using Ids = std::vector<int32_t>;

Ids concat(const Ids& a, const Ids& b) {
  Ids out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

Ids slice(const Ids& ids, int64_t begin, int64_t end) {
  return Ids(ids.begin() + begin, ids.begin() + end);
}

class SequenceCutTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = make_backend(GetParam(), 2);
    model_ = std::make_unique<Model>(Checkpoint::open(every_role_model_dir()), *backend_);
  }
  Model& model() { return *model_; }
  int64_t W() { return model_->config().text.sliding_window; }
  int64_t vocab() { return model_->config().text.vocab_size; }

  // A fresh exact prefill of `ids`; returns the state.
  SequenceState prefilled(const Ids& ids, PrefillOptions options = {}) {
    SequenceState s = model_->new_sequence();
    model_->prefill(s, ids, options);
    return s;
  }

  // Decodes `n` fixed tokens (an answer the cut later drops).
  void decode_tail(SequenceState& s, int64_t n, uint32_t seed) {
    for (int32_t id : test_prompt(n, vocab(), seed)) model_->decode(s, id);
  }

  // A fresh state holding `tokens` and the global KV rows of `source`'s first tokens.size()
  // tokens: what a restore from the SSD blocks builds (storage/kv_payload.h load_prefix).
  SequenceState restored(const SequenceState& source, const Ids& tokens) {
    SequenceState s = model_->new_sequence();
    const auto T = static_cast<int64_t>(tokens.size());
    for (size_t l = 0; l < source.global.size(); ++l) {
      const GlobalKv& g = source.global[l];
      if (g.ratio == 0) continue;
      restore_global_kv(*backend_, s.global[l], read_global_kv(*backend_, g, 0, T / g.ratio));
    }
    s.tokens = tokens;
    s.dead.assign(tokens.size(), 0);
    return s;
  }

  // Every cache of two states equal bit for bit: rings, entries, index keys, pending groups.
  void expect_same_state(SequenceState& a, SequenceState& b) {
    ASSERT_EQ(a.tokens, b.tokens);
    for (int64_t layer = 0; layer < model_->config().text.num_hidden_layers; ++layer) {
      const auto l = static_cast<size_t>(layer);
      EXPECT_EQ(model_->dequantized_ring(a, layer), model_->dequantized_ring(b, layer)) << layer;
      const GlobalKv& ga = a.global[l];
      const GlobalKv& gb = b.global[l];
      if (ga.ratio == 0) continue;
      ASSERT_EQ(ga.n_entries, gb.n_entries) << layer;
      ASSERT_EQ(ga.n_pending, gb.n_pending) << layer;
      const GlobalKvRows ra = read_global_kv(*backend_, ga, 0, ga.n_entries);
      const GlobalKvRows rb = read_global_kv(*backend_, gb, 0, gb.n_entries);
      EXPECT_EQ(ra.entries, rb.entries) << layer;
      EXPECT_EQ(ra.index_keys, rb.index_keys) << layer;
      if (ga.n_pending > 0) {
        std::vector<float> pa(static_cast<size_t>(ga.pending_kv.numel()));
        std::vector<float> pb(pa.size());
        backend_->read(ga.pending_kv, pa.data(), pa.size() * sizeof(float));
        backend_->read(gb.pending_kv, pb.data(), pb.size() * sizeof(float));
        pa.resize(static_cast<size_t>(ga.n_pending * model_->config().text.head_dim));
        pb.resize(pa.size());
        EXPECT_EQ(pa, pb) << layer;
      }
    }
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

// Thinking mode's case: the prompt's last token (<think>) is marked, the answer decoded past the
// window and across compressor groups, then the next prompt cuts back to the mark.
TEST_P(SequenceCutTest, CutToAMarkContinuesLikeAFreshPrefillOfThePrefix) {
  const Ids prompt = test_prompt(33, vocab(), 31);  // odd mark position 32: a pending pair token
  for (const int64_t mark : {int64_t{32}, int64_t{21}}) {
    SCOPED_TRACE("mark at " + std::to_string(mark));
    PrefillOptions o;
    o.mark_at = mark;
    SequenceState live = prefilled(prompt, o);
    ASSERT_TRUE(live.mark.has_value());
    EXPECT_EQ(live.mark->position, mark);
    // The split at the mark changes no value: the logits equal those of the unsplit prefill.
    SequenceState unsplit = prefilled(prompt);
    expect_same_state(live, unsplit);
    decode_tail(live, 2 * W() + 3, 32);

    EXPECT_EQ(cut_sequence(model().backend(), live, mark), 0);  // exact: nothing to replay
    EXPECT_EQ(live.position(), mark);
    const Ids next = test_prompt(9, vocab(), 33);
    const auto cut_logits = model().prefill(live, next, PrefillOptions{});

    // The fresh run computes the prefix as the live one did: as part of a 33-token prompt (top-k
    // rows as wide as that prompt's entries, docs/numerics.md "Top-k"), then the next prompt.
    SequenceState fresh = model().new_sequence();
    const Ids prefix = slice(prompt, 0, mark);
    SequenceStep head;
    head.state = &fresh;
    head.tokens = prefix;
    head.prompt_end = static_cast<int64_t>(prompt.size());
    head.logits = LogitsWanted::None;
    model().step(std::span<SequenceStep>(&head, 1));
    const auto fresh_logits = model().prefill(fresh, next, PrefillOptions{});
    EXPECT_EQ(cut_logits, fresh_logits);
    expect_same_state(live, fresh);
    EXPECT_EQ(model().decode(live, 5), model().decode(fresh, 5));
  }
}

// An edit or a regenerate: a cut where no mark is. Positions inside the window, past it, odd
// (a pending ratio-2 token to rebuild) and even.
TEST_P(SequenceCutTest, BoundedCutContinuesLikeARestoreOfThePrefix) {
  const Ids prompt = test_prompt(40, vocab(), 41);
  for (const int64_t cut : {int64_t{7}, int64_t{21}, int64_t{30}}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    SequenceState live = prefilled(prompt);
    decode_tail(live, 5, 42);
    const int64_t replay = cut_sequence(model().backend(), live, cut);
    EXPECT_EQ(replay, std::min(W(), cut));
    EXPECT_EQ(live.position(), cut);

    // The restart: the prefix's global KV rows, computed by a separate prefill of the prefix.
    const Ids prefix = slice(prompt, 0, cut);
    SequenceState source = prefilled(prefix);
    SequenceState restart = restored(source, prefix);
    expect_same_state(live, restart);  // the cut state is the restored one

    const Ids next = concat(slice(prefix, cut - replay, cut), test_prompt(9, vocab(), 43));
    for (const PrefillMode mode : {PrefillMode::Exact, PrefillMode::Bounded}) {
      SequenceState a = prefilled(prompt);
      decode_tail(a, 5, 42);
      cut_sequence(model().backend(), a, cut);
      SequenceState b = restored(source, prefix);
      PrefillOptions o;
      o.mode = mode;
      o.replay = replay;
      EXPECT_EQ(model().prefill(a, next, o), model().prefill(b, next, o));
      expect_same_state(a, b);
      EXPECT_EQ(model().decode(a, 5), model().decode(b, 5));
    }
    if (cut <= W()) {
      // The replay covers the whole prefix: the same as a fresh exact prefill.
      SequenceState fresh = model().new_sequence();
      const auto fresh_logits =
          model().prefill(fresh, concat(prefix, test_prompt(9, vocab(), 43)), {});
      PrefillOptions o;
      o.replay = replay;
      EXPECT_EQ(model().prefill(live, next, o), fresh_logits);
    }
  }
}

TEST_P(SequenceCutTest, AMarkPastTheCutIsDroppedAndBadRequestsChangeNothing) {
  const Ids prompt = test_prompt(30, vocab(), 51);
  PrefillOptions o;
  o.mark_at = 29;
  SequenceState live = prefilled(prompt, o);
  EXPECT_THROW(cut_sequence(model().backend(), live, 31), InvalidRequest);
  EXPECT_THROW(cut_sequence(model().backend(), live, -1), InvalidRequest);
  EXPECT_EQ(live.position(), 30);
  EXPECT_EQ(cut_sequence(model().backend(), live, 30), 0);  // no cut
  EXPECT_EQ(cut_sequence(model().backend(), live, 25), std::min<int64_t>(W(), 25));
  EXPECT_FALSE(live.mark.has_value());

  // A mark outside the prefill's new tokens is refused before anything runs.
  SequenceState s = model().new_sequence();
  o.mark_at = 30;
  EXPECT_THROW(model().prefill(s, prompt, o), InvalidRequest);
  o.mark_at = -2;
  EXPECT_THROW(model().prefill(s, prompt, o), InvalidRequest);
  EXPECT_EQ(s.position(), 0);
}

INSTANTIATE_TEST_SUITE_P(BothCpuBackends, SequenceCutTest,
                         ::testing::Values("cpu-reference", "cpu"));

}  // namespace
}  // namespace flashdesk::test
