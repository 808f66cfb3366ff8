// Chunked prefill and decode run the same path as a one-shot prefill: for every chunking (odd
// chunk boundaries for the ratio-2 layers, chunks crossing the 16-token window, single-token
// steps = decode) every block's output of every layer role equals the one-shot values, and so
// do the logits and the caches.
#include <cmath>
#include <string>

#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

struct PrefillRun {
  std::vector<float> logits;
  NamedTensors dump;
  SequenceState state;
};

PrefillRun run_prefill(Model& model, const std::vector<int32_t>& ids, const PrefillOptions& o) {
  PrefillRun r{{}, {}, model.new_sequence()};
  DumpRecorder rec(model, "prefill_", static_cast<int64_t>(ids.size()), 0, 0);
  r.logits = model.prefill(r.state, ids, o, &rec);
  r.dump = std::move(rec.tensors());
  return r;
}

// Max abs difference of block_out rows of `layer` between two dumps, over rows both ran.
double block_diff(const NamedTensors& a, const NamedTensors& b, int64_t layer) {
  const HostTensor& x = a.at("prefill_block_out");
  const HostTensor& y = b.at("prefill_block_out");
  const int64_t per_layer = x.numel() / x.shape[0];
  double m = 0;
  for (int64_t i = 0; i < per_layer; ++i) {
    const size_t k = static_cast<size_t>(layer * per_layer + i);
    m = std::max(m, std::fabs(double(x.as<float>()[k]) - double(y.as<float>()[k])));
  }
  return m;
}

class ChunkedPrefillTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ChunkedPrefillTest, EveryBlockMatchesOneShot) {
  LoadedModel m = load_every_role();
  const TextConfig& t = m.model->config().text;
  const auto ids = test_prompt(41, t.vocab_size);  // odd length: a pending ratio-2 token
  const PrefillRun one = run_prefill(*m.model, ids, PrefillOptions{PrefillMode::Exact, 0, false});
  const PrefillRun chunked =
      run_prefill(*m.model, ids, PrefillOptions{PrefillMode::Exact, GetParam(), false});
  // Same ops on the same values in the same order per row: the results are identical; the
  // tolerance (1e-6 of the magnitude) only allows for FP32 reassociation a backend may add.
  for (int64_t layer = 0; layer < t.num_hidden_layers; ++layer) {
    const std::string role(attn_role_name(m.model->roles()[static_cast<size_t>(layer)].role));
    EXPECT_LE(block_diff(one.dump, chunked.dump, layer), 1e-6 * 64)
        << "layer " << layer << " (" << role << ")";
  }
  EXPECT_LE(max_abs_diff(one.logits, chunked.logits), 1e-6 * max_abs(one.logits));
  for (int64_t layer = 0; layer < t.num_hidden_layers; ++layer) {
    EXPECT_EQ(m.model->dequantized_ring(one.state, layer),
              m.model->dequantized_ring(chunked.state, layer));
    const GlobalKv& g = one.state.global[static_cast<size_t>(layer)];
    if (!g.entries.defined()) continue;
    EXPECT_EQ(g.n_entries, chunked.state.global[static_cast<size_t>(layer)].n_entries);
    EXPECT_EQ(g.n_pending, chunked.state.global[static_cast<size_t>(layer)].n_pending);
    EXPECT_EQ(m.model->dequantized_entries(one.state, layer),
              m.model->dequantized_entries(chunked.state, layer));
    EXPECT_EQ(m.model->dequantized_index_keys(one.state, layer),
              m.model->dequantized_index_keys(chunked.state, layer));
  }
}

// 1 = token-by-token (the decode path); 3 and 7 split ratio-2 pairs; 17 crosses the window.
INSTANTIATE_TEST_SUITE_P(Chunks, ChunkedPrefillTest, ::testing::Values(1, 3, 7, 16, 17, 40));

// A decoded token computes what the same token computes inside a longer prompt. With more
// entries than index_topk (or candidate blocks), the two can differ where exactly tied index
// scores meet the top-k cut, because torch's topk (and so the official code and this engine)
// breaks ties depending on the row's length: 16 tokens keep every entry and block selected on
// the every-role checkpoint (top-k 16, 6 blocks of 4), so here they must agree exactly; the
// selections themselves are checked against the official decode path by GoldenBlocks.
TEST(ChunkedPrefill, DecodeAfterPrefillEqualsLongerPrefill) {
  LoadedModel m = load_every_role();
  const TextConfig& t = m.model->config().text;
  const int64_t n = 16;
  ASSERT_LE(n, t.index_topk);
  ASSERT_LE(n, t.candidate_topk_blocks * t.candidate_block_size);
  const auto ids = test_prompt(n, t.vocab_size, 5);
  SequenceState a = m.model->new_sequence(), b = m.model->new_sequence();
  std::vector<int32_t> head(ids.begin(), ids.end() - 2);
  m.model->prefill(a, head, PrefillOptions{});
  m.model->decode(a, ids[n - 2]);
  const auto la = m.model->decode(a, ids[n - 1]);
  const auto lb = m.model->prefill(b, ids, PrefillOptions{});
  EXPECT_LE(max_abs_diff(la, lb), 1e-6 * max_abs(lb));
  EXPECT_EQ(a.position(), n);
}

TEST(ChunkedPrefill, BatchedSequencesMatchSeparateOnes) {
  LoadedModel m = load_every_role();
  const int64_t V = m.model->config().text.vocab_size;
  const auto p1 = test_prompt(23, V, 7), p2 = test_prompt(9, V, 8);
  SequenceState s1 = m.model->new_sequence(), s2 = m.model->new_sequence();
  SequenceStep steps[2];
  steps[0].state = &s1;
  steps[0].tokens = p1;
  steps[1].state = &s2;
  steps[1].tokens = p2;
  m.model->step(steps);
  SequenceState r1 = m.model->new_sequence(), r2 = m.model->new_sequence();
  const auto l1 = m.model->prefill(r1, p1, PrefillOptions{});
  const auto l2 = m.model->prefill(r2, p2, PrefillOptions{});
  EXPECT_LE(max_abs_diff(steps[0].out_logits, l1), 1e-6 * max_abs(l1));
  EXPECT_LE(max_abs_diff(steps[1].out_logits, l2), 1e-6 * max_abs(l2));
}

}  // namespace
}  // namespace flashdesk::test
