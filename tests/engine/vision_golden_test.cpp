// The C++ vision path on the demo model (assets/models/flash-tiny) against the PyTorch goldens of
// tools/vision_goldens.py (trainer's vision tower + the oracle's text forward), on every CPU
// backend. Tolerances: ViT features and span rows within 2% of the largest magnitude (bf16
// rounding after every op may flip a last bit where the FP32 sums are ordered differently, and
// flips propagate through the blocks; measured 0.4-0.9%). The text blocks on an image prompt, each
// fed the oracle's input: within 5e-3, as GoldenBlocks (measured <= 2.1e-3). End-to-end logits:
// the same top token and cosine > 0.95 only. The trained model's forward is chaotic in summation
// order: the oracle itself, with FP32 torch-order sums, moves these logits by 4.3% / 9.3% of the
// largest (cosine 0.998 / 0.989; stored as image{i}.noise), and the engine, whose blocks each match
// the oracle, lands 10-13% away (cosine 0.970-0.990) after twelve blocks of amplification
// (docs/model-spec.md §14). The block-by-block test is the precise one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/model/dump_recorder.h"
#include "engine/model/model.h"
#include "engine/util/numeric.h"
#include "engine/vision/vision_encoder.h"
#include "tests/engine/backend_test_util.h"
#include "tests/engine/error_measures.h"
#include "tests/engine/golden_test_util.h"

namespace flashdesk::test {
namespace {

const std::filesystem::path kSource(FD_SOURCE_DIR);
constexpr double kLogitsCosine = 0.95;  // end to end: a gross check (see the top of the file)

struct Golden {
  SafetensorsFile file{kSource / "tests/data/vision/vision-golden.safetensors"};

  std::vector<float> f32(const std::string& name) const {
    const SafetensorsEntry* e = file.find(name);
    EXPECT_NE(e, nullptr) << name;
    std::vector<float> out(e->nbytes / dtype_size(e->dtype));
    if (e->dtype == DType::BF16) {
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h = 0;
        std::memcpy(&h, file.data(*e) + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
    } else {
      std::memcpy(out.data(), file.data(*e), e->nbytes);
    }
    return out;
  }
  std::vector<int32_t> i32(const std::string& name) const {
    const SafetensorsEntry* e = file.find(name);
    std::vector<int32_t> out(e->nbytes / 4);
    std::memcpy(out.data(), file.data(*e), e->nbytes);
    return out;
  }
};

const std::filesystem::path kImages[2] = {kSource / "assets/eval/demo/images/image-0.png",
                                          kSource / "tests/data/vision/shapes-500x300.png"};

class VisionGoldenTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    ckpt_ = Checkpoint::open(kSource / "assets/models/flash-tiny");
    encoder_ = std::make_unique<VisionEncoder>(*ckpt_, be());
  }
  std::vector<float> read(const Tensor& t) { return host<float>(t); }
  // The oracle's image span rows for golden prefix `p` ("image0."), where they enter the prompt.
  ImageEmbedding oracle_span(const std::string& p) {
    const std::vector<float> rows = golden_.f32(p + "span");
    const int64_t dim = ckpt_->config().text.hidden_size;
    return ImageEmbedding{golden_.i32(p + "span_first")[0],
                          f32(Shape{static_cast<int64_t>(rows.size()) / dim, dim}, rows)};
  }

  std::shared_ptr<const Checkpoint> ckpt_;
  std::unique_ptr<VisionEncoder> encoder_;
  Golden golden_;
};

TEST_P(VisionGoldenTest, FeaturesAndSpanRowsMatchPyTorch) {
  for (int i = 0; i < 2; ++i) {
    const PreprocessedImage img = preprocess_image(load_image(kImages[i]), encoder_->config());
    const Tensor feats = encoder_->features(img);
    const std::string p = "image" + std::to_string(i) + ".";
    const double fe = relative_error(read(feats), golden_.f32(p + "features"));
    const double se = relative_error(read(encoder_->encode(img)), golden_.f32(p + "span"));
    EXPECT_LT(fe, 0.02) << p << "features";
    EXPECT_LT(se, 0.02) << p << "span";
    std::printf("[ vision   ] %s %s: features max rel err %.2e, span %.2e\n", GetParam().c_str(),
                p.c_str(), fe, se);
  }
}

TEST_P(VisionGoldenTest, LogitsWithImageMatchOracle) {
  Model model(ckpt_, be());
  for (int i = 0; i < 2; ++i) {
    const std::string p = "image" + std::to_string(i) + ".";
    const PreprocessedImage img = preprocess_image(load_image(kImages[i]), encoder_->config());
    const std::vector<int32_t> ids = golden_.i32(p + "prompt_ids");
    const ImageEmbedding span{golden_.i32(p + "span_first")[0], encoder_->encode(img)};
    PrefillOptions opt;
    opt.mode = PrefillMode::Exact;
    opt.images = std::span<const ImageEmbedding>(&span, 1);
    SequenceState state = model.new_sequence();
    const std::vector<float> got = model.prefill(state, ids, opt);
    const std::vector<float> want = golden_.f32(p + "logits");
    const double err = relative_error(got, want), cos = cosine(got, want);
    EXPECT_GT(cos, kLogitsCosine) << p;
    EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
              std::max_element(want.begin(), want.end()) - want.begin())
        << p;
    // The span's tokens are dead for Engram and route with bias_vl.
    for (int64_t j = 0; j < span.rows.rows(); ++j)
      EXPECT_EQ(state.dead[static_cast<size_t>(span.first + j)], 1);
    const std::vector<float> noise = golden_.f32(p + "noise");
    std::printf(
        "[ vision   ] %s %s logits max rel err %.2e, cosine %.5f (the oracle's own "
        "summation-order noise: %.2e, cosine %.5f)\n",
        GetParam().c_str(), p.c_str(), err, cos, noise[0], noise[1]);
  }
}

TEST_P(VisionGoldenTest, LogitsFromPyTorchSpanRowsMatchOracle) {
  // The text side alone: the oracle's own span rows in, so only the text forward differs.
  Model model(ckpt_, be());
  for (int i = 0; i < 2; ++i) {
    const std::string p = "image" + std::to_string(i) + ".";
    const ImageEmbedding span = oracle_span(p);
    PrefillOptions opt;
    opt.images = std::span<const ImageEmbedding>(&span, 1);
    SequenceState state = model.new_sequence();
    const std::vector<float> got = model.prefill(state, golden_.i32(p + "prompt_ids"), opt);
    const std::vector<float> want = golden_.f32(p + "logits");
    const double err = relative_error(got, want);
    EXPECT_GT(cosine(got, want), kLogitsCosine) << p;
    EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
              std::max_element(want.begin(), want.end()) - want.begin())
        << p;
    std::printf("[ vision   ] %s %s logits from the oracle's span: max rel err %.2e\n",
                GetParam().c_str(), p.c_str(), err);
  }
}

// The text forward on an image prompt, block by block: every block is fed the oracle's input
// (DumpRecorder teacher forcing) with the oracle's span rows as the image embeddings, so what is
// compared is each block alone, as GoldenBlocks does for text prompts. The end-to-end logits above
// are chaotic on a trained model (the oracle with FP32 sums moves them by image{i}.noise); this is
// the precise check that the image span (bias_vl routing, dead Engram rows, span rows in place)
// runs through the blocks as in the oracle.
TEST_P(VisionGoldenTest, BlocksOnAnImagePromptMatchTheOracleFedItsInputs) {
  const NamedTensors g = load_golden(kSource / "tests/data/vision/image0-blocks.safetensors");
  Model model(ckpt_, be());
  const std::vector<int32_t> prompt = ids(g, "prompt_ids");
  const int64_t D = ckpt_->config().text.hidden_size, L = ckpt_->config().text.num_hidden_layers;
  const int64_t T = static_cast<int64_t>(prompt.size());
  const ImageEmbedding span = oracle_span("image0.");
  PrefillOptions opt;
  opt.mode = PrefillMode::Exact;
  opt.images = std::span<const ImageEmbedding>(&span, 1);
  SequenceState state = model.new_sequence();
  DumpRecorder rec(model, "prefill_", T, 0, 0);
  rec.set_block_inputs(&g);
  model.prefill(state, prompt, opt, &rec);
  std::map<int64_t, int64_t> candidate_entries;  // what the candidate masks are written over
  for (const LayerRole& r : model.roles())
    if (r.builds_candidates)
      candidate_entries[r.layer] = state.global[static_cast<size_t>(r.kv_source)].n_entries;
  rec.finish(candidate_entries);
  const std::vector<float> gold = floats(g, "prefill_block_out");
  const std::vector<float> eng = floats(rec.tensors(), "prefill_block_out");
  const std::vector<float> embed = floats(g, "prefill_embed");
  ASSERT_EQ(eng.size(), gold.size());
  const Layout x{1, L, T, static_cast<int64_t>(gold.size()) / (L * T * D), D};
  // A rounding tie that the two sides break differently moves a block by a size only the prompt
  // and the weights set, in whichever block its sums land near a tie: the oracle with FP32 sums,
  // fed the same inputs, moves one of the 1827-step model's blocks by 6.0e-3 (and the engine
  // another by 6.2e-3). So the bound is 5e-3 or 1.5x the largest such move the file records,
  // whichever is larger. Losing the image span's handling moves blocks by 0.1-0.6.
  ASSERT_TRUE(g.contains("prefill_block_noise")) << "regenerate with tools/vision_goldens.py";
  const std::vector<float> noise = floats(g, "prefill_block_noise");
  ASSERT_EQ(static_cast<int64_t>(noise.size()), L);
  const double bound = std::max(5e-3, 1.5 * *std::max_element(noise.begin(), noise.end()));
  for (int64_t l = 0; l < L; ++l) {
    const double err = block_error(gold, eng, embed, x, l, {}).ratio();
    EXPECT_LE(err, bound) << "block " << l;
    std::printf(
        "[ vision   ] %s image0 block %lld fed the oracle's input: rel err %.2e (bound "
        "%.2e; the FP32-sums oracle %.2e)\n",
        GetParam().c_str(), static_cast<long long>(l), err, bound,
        static_cast<double>(noise[static_cast<size_t>(l)]));
  }
}

// Records layer-0 routed experts and the Engram hash ids of a prefill.
class RoutingRecorder : public ForwardObserver {
 public:
  std::vector<int32_t> experts;                 // [T, k] of layer 0
  std::map<int64_t, std::vector<int64_t>> ids;  // Engram layer -> [T, cols]
  void on_experts(int64_t layer, std::span<const RowInfo>, const HostTensor& e,
                  const HostTensor&) override {
    if (layer == 0) experts.assign(e.as<int32_t>().begin(), e.as<int32_t>().end());
  }
  void on_engram(int64_t layer, std::span<const RowInfo>, const HostTensor& h,
                 const HostTensor&) override {
    ids[layer].assign(h.as<int64_t>().begin(), h.as<int64_t>().end());
  }
};

TEST_P(VisionGoldenTest, SpanTokensRouteWithBiasVlAndAreDeadForEngram) {
  // With the oracle's span rows as input, layer 0 sees the same embeddings: its expert choice
  // (bias_vl on the span, bias elsewhere) and the Engram ids (the span cuts the n-grams) must
  // equal the oracle's exactly. Routing the span with the text bias fails this test.
  Model model(ckpt_, be());
  const auto& engram_layers = ckpt_->config().text.engram_layer_ids;
  for (int i = 0; i < 2; ++i) {
    const std::string p = "image" + std::to_string(i) + ".";
    const ImageEmbedding span = oracle_span(p);
    PrefillOptions opt;
    opt.images = std::span<const ImageEmbedding>(&span, 1);
    SequenceState state = model.new_sequence();
    RoutingRecorder rec;
    model.prefill(state, golden_.i32(p + "prompt_ids"), opt, &rec);
    EXPECT_EQ(rec.experts, golden_.i32(p + "layer0_expert_ids")) << p;
    const SafetensorsEntry* e = golden_.file.find(p + "engram_hash_ids");
    ASSERT_NE(e, nullptr);
    const int64_t T = e->shape[0], L = e->shape[1], cols = e->shape[2];
    std::vector<int64_t> want(static_cast<size_t>(T * L * cols));
    std::memcpy(want.data(), golden_.file.data(*e), e->nbytes);
    for (int64_t l = 0; l < L; ++l) {
      const std::vector<int64_t>& got = rec.ids[engram_layers[static_cast<size_t>(l)]];
      ASSERT_EQ(static_cast<int64_t>(got.size()), T * cols);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(got[static_cast<size_t>(t * cols + c)],
                    want[static_cast<size_t>((t * L + l) * cols + c)])
              << p << " layer " << l << " token " << t << " column " << c;
    }
  }
}

TEST_P(VisionGoldenTest, ChunkedPrefillSplittingTheSpanGivesTheSameLogits) {
  Model model(ckpt_, be());
  const PreprocessedImage img = preprocess_image(load_image(kImages[0]), encoder_->config());
  const std::vector<int32_t> ids = golden_.i32("image0.prompt_ids");
  const ImageEmbedding span{golden_.i32("image0.span_first")[0], encoder_->encode(img)};
  PrefillOptions opt;
  opt.images = std::span<const ImageEmbedding>(&span, 1);
  SequenceState one = model.new_sequence(), chunked = model.new_sequence();
  const auto a = model.prefill(one, ids, opt);
  opt.chunk_tokens = span.first + 5;  // the first chunk ends inside the span
  const auto b = model.prefill(chunked, ids, opt);
  EXPECT_EQ(a, b);
  EXPECT_EQ(one.dead, chunked.dead);
}

TEST_P(VisionGoldenTest, TheImageChangesTheLogits) {
  // Without the span embeddings (plain image-token embeddings) the logits differ: the image
  // path is really used.
  Model model(ckpt_, be());
  const std::vector<int32_t> ids = golden_.i32("image0.prompt_ids");
  SequenceState state = model.new_sequence();
  const auto plain = model.prefill(state, ids, PrefillOptions{});
  EXPECT_GT(relative_error(plain, golden_.f32("image0.logits")), 0.05);
}

FD_BACKEND_TEST_SUITE(VisionGoldenTest);

}  // namespace
}  // namespace flashdesk::test
