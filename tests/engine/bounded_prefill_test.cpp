// Decoder bounded replay: the encoder and the decoder's global KV are exactly the exact-mode
// values, the decoder blocks run on the last W tokens only, prompts within the window give the
// exact logits, and chunking a bounded prefill changes nothing.
#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

TEST(BoundedPrefill, EncoderAndGlobalKvAreExactDecoderRunsOnTheTail) {
  LoadedModel m = load_every_role();
  const TextConfig& t = m.model->config().text;
  const int64_t P = 40, W = t.sliding_window, first = m.model->decoder_first();
  ASSERT_EQ(first, 8);  // the every-role config's decoder: layers 8..13
  const auto ids = test_prompt(P, t.vocab_size, 3);
  SequenceState ex = m.model->new_sequence(), bd = m.model->new_sequence();
  DumpRecorder rex(*m.model, "prefill_", P, 0, 0), rbd(*m.model, "prefill_", P, 0, 0);
  const auto lex = m.model->prefill(ex, ids, PrefillOptions{PrefillMode::Exact, 0, false}, &rex);
  const auto lbd = m.model->prefill(bd, ids, PrefillOptions{PrefillMode::Bounded, 0, false}, &rbd);
  const HostTensor& run = rbd.tensors().at("prefill_positions_run");
  for (int64_t layer = 0; layer < t.num_hidden_layers; ++layer)
    for (int64_t p = 0; p < P; ++p)
      EXPECT_EQ(run.as<uint8_t>()[static_cast<size_t>(layer * P + p)],
                layer < first || p >= P - W ? 1 : 0)
          << layer << "," << p;
  // Encoder blocks: identical.
  const auto& a = rex.tensors().at("prefill_block_out").as<float>();
  const auto& b = rbd.tensors().at("prefill_block_out").as<float>();
  const size_t per_layer = a.size() / static_cast<size_t>(t.num_hidden_layers);
  for (size_t i = 0; i < per_layer * static_cast<size_t>(first); ++i) ASSERT_EQ(a[i], b[i]) << i;
  // The decoder's global KV comes from the encoder's output for every token: identical.
  EXPECT_EQ(m.model->dequantized_entries(ex, first), m.model->dequantized_entries(bd, first));
  EXPECT_EQ(m.model->dequantized_index_keys(ex, first), m.model->dequantized_index_keys(bd, first));
  // Decoder windows were truncated, so the logits differ but stay close in scale.
  EXPECT_GT(max_abs_diff(lex, lbd), 0.0);
  EXPECT_EQ(lex.size(), lbd.size());
}

TEST(BoundedPrefill, PromptWithinTheWindowIsExact) {
  LoadedModel m = load_every_role();
  const auto ids = test_prompt(12, m.model->config().text.vocab_size, 4);
  SequenceState ex = m.model->new_sequence(), bd = m.model->new_sequence();
  const auto lex = m.model->prefill(ex, ids, PrefillOptions{PrefillMode::Exact, 0, false});
  const auto lbd = m.model->prefill(bd, ids, PrefillOptions{PrefillMode::Bounded, 0, false});
  EXPECT_EQ(lex, lbd);
}

TEST(BoundedPrefill, ChunkedBoundedMatchesOneShotBounded) {
  LoadedModel m = load_every_role();
  const auto ids = test_prompt(45, m.model->config().text.vocab_size, 6);
  for (int64_t chunk : {5, 13, 29}) {
    SequenceState a = m.model->new_sequence(), b = m.model->new_sequence();
    const auto la = m.model->prefill(a, ids, PrefillOptions{PrefillMode::Bounded, 0, false});
    const auto lb = m.model->prefill(b, ids, PrefillOptions{PrefillMode::Bounded, chunk, false});
    EXPECT_LE(max_abs_diff(la, lb), 1e-6 * max_abs(la)) << "chunk " << chunk;
    // Decoding continues identically from both states.
    const auto da = m.model->decode(a, ids[0]);
    const auto db = m.model->decode(b, ids[0]);
    EXPECT_LE(max_abs_diff(da, db), 1e-6 * max_abs(da)) << "chunk " << chunk;
  }
}

}  // namespace
}  // namespace flashdesk::test
