// The synthetic checkpoint (--synthetic-weights): every tensor and the Engram map byte for byte
// what make-random writes, the same logits, its fingerprint, bad input as errors, and the host
// bytes handed back once a backend has copied them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/random_init.h"
#include "engine/checkpoint/synthetic_checkpoint.h"
#include "engine/model/model.h"
#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cuda/cuda_devices.h"
#ifdef FLASHDESK_HAVE_CUDA
#include "engine/ops/cuda/cuda_backend.h"
#endif
#include "engine/ops/drawn_linear.h"
#include "engine/runtime/rank_group.h"
#include "engine/util/error.h"
#include "engine/util/sha256.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/engine/model_test_util.h"

namespace flashdesk {
namespace {

using testing::TempDir;

const std::filesystem::path kEveryRole = testing::config_asset("test-every-role.json");
const std::filesystem::path kFlashTinyConfig =
    std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny/config.json";

SyntheticWeights synthetic(uint64_t seed, std::vector<int64_t> layers = {}, int threads = 0) {
  SyntheticWeights w;
  w.seed = seed;
  w.layers = std::move(layers);
  w.threads = threads;
  return w;
}

std::vector<uint8_t> bytes_of(const TensorView& v) {
  return {v.data, v.data + v.nbytes};
}

// Same names in the same order, and each tensor's dtype, shape and bytes; the same Engram map and
// partial layers.
void expect_same_tensors(const Checkpoint& file, const Checkpoint& synth) {
  ASSERT_EQ(synth.tensor_names(), file.tensor_names());
  for (const std::string& name : file.tensor_names()) {
    const TensorView a = file.tensor(name), b = synth.tensor(name);
    ASSERT_EQ(b.dtype, a.dtype) << name;
    ASSERT_TRUE(std::ranges::equal(b.shape, a.shape)) << name;
    ASSERT_EQ(b.nbytes, a.nbytes) << name;
    ASSERT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << name;
    const TensorSpec spec = synth.tensor_spec(name);
    EXPECT_EQ(spec.dtype, a.dtype) << name;
    EXPECT_EQ(spec.nbytes(), a.nbytes) << name;
  }
  EXPECT_TRUE(std::ranges::equal(synth.engram_token_map(), file.engram_token_map()));
  EXPECT_EQ(synth.partial_layers(), file.partial_layers());
  EXPECT_EQ(synth.config().text.num_hidden_layers, file.config().text.num_hidden_layers);
}

TEST(SyntheticCheckpoint, EveryRoleTensorsAreMakeRandomBytes) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(5, 0, 2));
  const auto file = Checkpoint::open(dir.path());
  // The directory form of --model, and another thread count than the writer's.
  const auto synth = open_synthetic_checkpoint(dir.path(), synthetic(5, {}, 3));
  expect_same_tensors(*file, *synth);
  EXPECT_TRUE(synth->files().empty());
  EXPECT_EQ(synth->dir(), dir.path());
}

TEST(SyntheticCheckpoint, FlashTinyTensorsAndEngramMapAreMakeRandomBytes) {
  TempDir dir;
  write_random_checkpoint(kFlashTinyConfig, dir.path(), testing::random_options(9));
  const auto file = Checkpoint::open(dir.path());
  const auto synth = open_synthetic_checkpoint(kFlashTinyConfig, synthetic(9));
  ASSERT_FALSE(file->engram_token_map().empty());
  expect_same_tensors(*file, *synth);
  EXPECT_EQ(synth->dir(), kFlashTinyConfig.parent_path());  // where tokenizer.json is looked for
}

TEST(SyntheticCheckpoint, PartialLayersAreMakeRandomLayersBytes) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(4, 0, 0, {12}));
  const auto file = Checkpoint::open(dir.path(), {.allow_partial = true});
  const auto synth = open_synthetic_checkpoint(kEveryRole, synthetic(4, {12}));
  EXPECT_EQ(synth->partial_layers(), (std::vector<int64_t>{8, 12}));  // with its KV source
  expect_same_tensors(*file, *synth);
}

TEST(SyntheticCheckpoint, FingerprintKeysConfigSeedAndLayersNotFiles) {
  const std::string fp = open_synthetic_checkpoint(kEveryRole, synthetic(1))->fingerprint();
  EXPECT_EQ(fp.size(), 64u);
  EXPECT_EQ(open_synthetic_checkpoint(kEveryRole, synthetic(1, {}, 1))->fingerprint(), fp);
  EXPECT_NE(open_synthetic_checkpoint(kEveryRole, synthetic(2))->fingerprint(), fp);
  EXPECT_NE(open_synthetic_checkpoint(kEveryRole, synthetic(1, {12}))->fingerprint(), fp);
  EXPECT_NE(open_synthetic_checkpoint(kFlashTinyConfig, synthetic(1))->fingerprint(), fp);
  // The written directory digests its files: another fingerprint for the same bytes.
  EXPECT_NE(Checkpoint::open(test::every_role_model_dir())->fingerprint(), fp);
}

TEST(SyntheticCheckpoint, DigestReportSaysSynthetic) {
  const auto whole = open_synthetic_checkpoint(kEveryRole, synthetic(7));
  EXPECT_EQ(whole->weight_digest_report().synthesised, "make-random seed 7");
  EXPECT_EQ(whole->weight_digest_report().files, 0u);
  const auto partial = open_synthetic_checkpoint(kEveryRole, synthetic(7, {12}));
  EXPECT_EQ(partial->weight_digest_report().synthesised, "make-random seed 7, layers 8,12");
  EXPECT_TRUE(
      Checkpoint::open(test::every_role_model_dir())->weight_digest_report().synthesised.empty());
}

// What the generator makes may change only with kRandomWeightsVersion, which the fingerprint
// holds instead of a digest of the bytes.
TEST(SyntheticCheckpoint, GeneratedBytesArePinned) {
  const auto synth = open_synthetic_checkpoint(kEveryRole, synthetic(1));
  Sha256 h;
  for (const std::string& name : synth->tensor_names()) {
    const TensorView v = synth->tensor(name);
    h.update(name);
    h.update(std::span<const uint8_t>(v.data, v.nbytes));
  }
  EXPECT_EQ(Sha256::hex(h.finish()),
            "28d100abe7f0e1865241695f1d774f1c7a0e0ba8a5d99ecf5ea5b1bc0f31305b")
      << "the random weights changed: bump kRandomWeightsVersion (random_init.h) and pin the new "
         "digest here";
}

// Prefill and two greedy decode steps.
std::vector<std::vector<float>> run_model(std::shared_ptr<const Checkpoint> ckpt, Backend& be) {
  Model model(std::move(ckpt), be);
  SequenceState s = model.new_sequence();
  const auto ids = test::test_prompt(12, model.config().text.vocab_size, 3);
  std::vector<std::vector<float>> out = {model.prefill(s, ids, PrefillOptions{})};
  for (int step = 0; step < 2; ++step) {
    const auto next = static_cast<int32_t>(std::max_element(out.back().begin(), out.back().end()) -
                                           out.back().begin());
    out.push_back(model.decode(s, next));
  }
  return out;
}

// A CPU backend whose upload copies, as a GPU's does: the loader may hand every byte back.
class CopyingBackend final : public CpuReferenceBackend {
 public:
  CopyingBackend() : CpuReferenceBackend(2) {}
  Tensor upload(const TensorView& t) override {
    Tensor out = alloc(t.dtype, shape_of(t.shape));
    if (t.nbytes) std::memcpy(out.bytes(), t.data, t.nbytes);
    return out;
  }

 private:
  static Shape shape_of(std::span<const int64_t> d) {
    switch (d.size()) {
      case 1:
        return Shape{d[0]};
      case 2:
        return Shape{d[0], d[1]};
      case 3:
        return Shape{d[0], d[1], d[2]};
      default:
        FD_CHECK(d.size() == 4, "CopyingBackend: rank 1-4");
        return Shape{d[0], d[1], d[2], d[3]};
    }
  }
};

// A CPU backend that draws the linears and tables a synthetic checkpoint offers
// (Backend::draw_linear, draw_into_host), as
// the CUDA backend does on its GPU, here through the recipe's host generator: the loader's path
// for drawn weights, rank slices included, without a GPU.
class DrawingBackend final : public CpuReferenceBackend {
 public:
  DrawingBackend() : CpuReferenceBackend(2) {}
  LinearWeight draw_linear(const RandomWeightRecipe& r, int64_t first, int64_t rows) override {
    if (r.format == RandomTensorPlan::Format::Fp8Rows) return {};
    const DrawnLinearLayout l = drawn_linear_layout(r, first, rows);
    Tensor data = alloc(l.dtype, l.data), scale;
    if (l.scaled) scale = alloc(DType::F8_E8M0, l.scale);
    r.host_rows(first, first + rows, data.bytes(), l.scaled ? scale.bytes() : nullptr);
    ++drawn;
    ++drawn_by_all;
    return drawn_linear(r, l, std::move(data), std::move(scale));
  }
  bool draw_into_host(const RandomWeightRecipe& r, uint8_t* w, uint8_t* s) override {
    r.host_rows(0, r.rows, w, s);
    ++tables;
    ++tables_by_all;
    return true;
  }
  int drawn = 0, tables = 0;
  static inline std::atomic<int> drawn_by_all{0}, tables_by_all{0};
};

// Each recipe's host rows are the tensor's rows; what is not a drawable linear has no recipe.
TEST(SyntheticCheckpoint, RecipesRowsAreTheTensorsRows) {
  const auto synth = open_synthetic_checkpoint(kEveryRole, synthetic(6));
  int recipes = 0;
  for (const std::string& name : synth->tensor_names()) {
    const auto r = synth->random_recipe(name);
    const TensorSpec spec = synth->tensor_spec(name);
    const bool drawable =
        spec.shape.size() == 2 &&
        (spec.dtype == DType::BF16 || spec.dtype == DType::F8_E4M3 || spec.dtype == DType::I8);
    ASSERT_EQ(r.has_value(), drawable) << name;
    if (!r) continue;
    ++recipes;
    EXPECT_EQ(r->weight, name);
    EXPECT_EQ(r->stream, tensor_stream(6, name));
    const TensorView w = synth->tensor(name);
    const size_t row_bytes = w.nbytes / static_cast<size_t>(r->rows);
    // The last 32-row group (or row), which a rank's slice or a flagged unit may ask for alone.
    const int64_t r0 =
        r->format == RandomTensorPlan::Format::Fp8Tiles ? (r->rows - 1) / 32 * 32 : r->rows - 1;
    std::vector<uint8_t> rows(row_bytes * static_cast<size_t>(r->rows - r0)), scale(4096);
    r->host_rows(r0, r->rows, rows.data(), scale.data());
    EXPECT_EQ(std::memcmp(rows.data(), w.data + static_cast<size_t>(r0) * row_bytes, rows.size()),
              0)
        << name;
    if (!r->scale.empty()) {
      const TensorView s = synth->tensor(r->scale);
      const size_t scale_row = s.nbytes / static_cast<size_t>(s.dim(0));
      const size_t first =
          static_cast<size_t>(r->format == RandomTensorPlan::Format::Fp8Tiles ? r0 / 32 : r0);
      EXPECT_EQ(std::memcmp(scale.data(), s.data + first * scale_row, scale_row), 0) << r->scale;
    }
  }
  EXPECT_GT(recipes, 50);
  EXPECT_FALSE(synth->random_recipe("layers.2.attn.wq_b.scale"));
  EXPECT_FALSE(synth->random_recipe("layers.2.hc_attn_base"));
  EXPECT_FALSE(Checkpoint::open(test::every_role_model_dir())->random_recipe("embed.weight"));
}

TEST(SyntheticCheckpoint, DrawnLinearsAndTablesGiveTheWrittenCheckpointsLogits) {
  CpuReferenceBackend be(2);
  const auto want = run_model(Checkpoint::open(test::every_role_model_dir()), be);
  std::shared_ptr<const SyntheticCheckpoint> read =
      open_synthetic_checkpoint(kEveryRole, synthetic(1));
  std::shared_ptr<const SyntheticCheckpoint> drawn =
      open_synthetic_checkpoint(kEveryRole, synthetic(1));
  DrawingBackend drawing;
  EXPECT_EQ(run_model(drawn, drawing), want);
  EXPECT_GT(drawing.drawn, 50);
  EXPECT_EQ(drawing.tables, 2);  // the two Engram layers' tables
  // Of the drawn checkpoint's bytes only the embedding table's (read through `raw`, which this
  // backend keeps in place) were generated by the host, and the tables drawn into its memory are
  // there: no linear's bytes, which the read checkpoint holds.
  EXPECT_EQ(run_model(read, be), want);
  uint64_t tables = 0;
  for (const std::string& name : drawn->tensor_names())
    if (name.find("engram.embed.") != std::string::npos)
      tables += drawn->tensor_spec(name).nbytes();
  EXPECT_EQ(drawn->resident_bytes(), drawn->tensor_spec("embed.weight").nbytes() + tables);
  EXPECT_GT(read->resident_bytes(), drawn->resident_bytes() + 1000000);
}

// Two ranks, each drawing its share of the row-split linears, and the tables drawn once.
TEST(SyntheticCheckpoint, RanksDrawingTheirRowsGiveTheWrittenCheckpointsLogits) {
  const auto drawing_rank = [](int) { return std::make_unique<DrawingBackend>(); };
  const auto cpu_rank = [](int) { return std::make_unique<CpuReferenceBackend>(1); };
  std::shared_ptr<const Checkpoint> ckpt = open_synthetic_checkpoint(kEveryRole, synthetic(1));
  const auto ids = test::test_prompt(12, ckpt->config().text.vocab_size, 5);
  RankGroup file(Checkpoint::open(test::every_role_model_dir()), 2, cpu_rank);
  const int before = DrawingBackend::drawn_by_all, tables_before = DrawingBackend::tables_by_all;
  RankGroup synth(ckpt, 2, drawing_rank);
  EXPECT_GT(DrawingBackend::drawn_by_all - before, 100);
  // Each table drawn once, by the first rank to ask; the other rank shares those bytes.
  EXPECT_EQ(DrawingBackend::tables_by_all - tables_before, 2);
  EXPECT_EQ(synth.prefill(ids, PrefillOptions{}), file.prefill(ids, PrefillOptions{}));
}

// The CUDA backend drawing the linears on its GPU (random_draw.h) gives the logits it gives for
// the written checkpoint, to the bit.
TEST(SyntheticCheckpoint, DrawnOnTheGpuGiveTheWrittenCheckpointsLogits) {
#ifndef FLASHDESK_HAVE_CUDA
  GTEST_SKIP() << cuda_unavailable_reason();
#else
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  CudaBackend reading(0);
  const auto want = run_model(Checkpoint::open(test::every_role_model_dir()), reading);
  CudaBackend drawing(0);
  drawing.set_draw_weights(true);
  EXPECT_EQ(run_model(open_synthetic_checkpoint(kEveryRole, synthetic(1)), drawing), want);
  EXPECT_GT(drawing.draw_stats().draws, 50u);
  EXPECT_GT(drawing.draw_stats().units, 0u);
  std::printf("drawn: %llu linears and table chunks, %llu units, %llu of them by the host\n",
              static_cast<unsigned long long>(drawing.draw_stats().draws),
              static_cast<unsigned long long>(drawing.draw_stats().units),
              static_cast<unsigned long long>(drawing.draw_stats().host_units));
#endif
}

TEST(SyntheticCheckpoint, SameLogitsAsTheWrittenCheckpoint) {
  CpuReferenceBackend be(2);
  const auto want = run_model(Checkpoint::open(test::every_role_model_dir()), be);  // seed 1
  std::shared_ptr<const SyntheticCheckpoint> synth =
      open_synthetic_checkpoint(kEveryRole, synthetic(1));
  EXPECT_EQ(run_model(synth, be), want);
  // The CPU backend reads most weights in place: those bytes stay for the checkpoint's life.
  EXPECT_GT(synth->resident_bytes(), 0u);
}

TEST(SyntheticCheckpoint, ACopyingBackendHandsTheBytesBack) {
  CpuReferenceBackend be(2);
  const auto want = run_model(Checkpoint::open(test::every_role_model_dir()), be);
  std::shared_ptr<const SyntheticCheckpoint> synth =
      open_synthetic_checkpoint(kEveryRole, synthetic(1));
  CopyingBackend copying;
  Model model(synth, copying);
  EXPECT_EQ(synth->resident_bytes(), 0u);  // every weight copied, then released
  EXPECT_EQ(run_model(synth, copying), want);
}

// Ranks load at once, each reading (and, for the widened vectors, releasing) the same tensors.
TEST(SyntheticCheckpoint, RanksLoadingAtOnceGiveTheWrittenCheckpointsLogits) {
  const auto cpu_rank = [](int) { return std::make_unique<CpuReferenceBackend>(1); };
  std::shared_ptr<const Checkpoint> ckpt = open_synthetic_checkpoint(kEveryRole, synthetic(1));
  const auto ids = test::test_prompt(12, ckpt->config().text.vocab_size, 5);
  RankGroup file(Checkpoint::open(test::every_role_model_dir()), 2, cpu_rank);
  RankGroup synth(ckpt, 2, cpu_rank);
  EXPECT_EQ(synth.prefill(ids, PrefillOptions{}), file.prefill(ids, PrefillOptions{}));
}

TEST(SyntheticCheckpoint, AReleasedWeightIsGeneratedAgain) {
  const auto synth = open_synthetic_checkpoint(kEveryRole, synthetic(1));
  const std::string weight = "layers.2.attn.wq_b.weight", scale = "layers.2.attn.wq_b.scale";
  const std::vector<uint8_t> first = bytes_of(synth->tensor(weight));
  const std::vector<uint8_t> first_scale = bytes_of(synth->tensor(scale));
  const uint64_t held = synth->resident_bytes();
  EXPECT_EQ(held, first.size() + first_scale.size());  // generated together
  synth->release_tensor(weight);
  EXPECT_EQ(synth->resident_bytes(), held);  // the scale is still read
  synth->release_tensor(scale);
  EXPECT_EQ(synth->resident_bytes(), 0u);
  EXPECT_EQ(bytes_of(synth->tensor(weight)), first);
  EXPECT_EQ(bytes_of(synth->tensor(scale)), first_scale);
}

TEST(SyntheticCheckpointDeathTest, ReleasingMoreOftenThanReadIsABug) {
  const auto synth = open_synthetic_checkpoint(kEveryRole, synthetic(1));
  EXPECT_DEATH(synth->release_tensor("norm.weight"), "released more often than it was read");
}

TEST(SyntheticCheckpoint, ConcurrentReadersShareOneGeneration) {
  const auto synth = open_synthetic_checkpoint(kEveryRole, synthetic(1, {}, 2));
  const std::vector<std::string> names = synth->tensor_names();
  std::vector<std::vector<const uint8_t*>> seen(4);
  {
    std::vector<std::jthread> readers;
    for (auto& mine : seen)
      readers.emplace_back([&] {
        for (const std::string& name : names) mine.push_back(synth->tensor(name).data);
      });
  }
  for (const auto& other : seen) EXPECT_EQ(other, seen.front());
}

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SyntheticCheckpoint, BadInputIsAnErrorNamingIt) {
  TempDir dir;
  EXPECT_NE(error_of<IoError>([&] {
              open_synthetic_checkpoint(dir / "none.json", {});
            }).find("none.json"),
            std::string::npos);
  EXPECT_NE(
      error_of<IoError>([&] { open_synthetic_checkpoint(dir.path(), {}); }).find("config.json"),
      std::string::npos);  // a directory without one
  testing::write_text(dir / "config.json", R"({"text_config": {"hidden_size": "wide"}})");
  EXPECT_NE(error_of<FormatError>([&] {
              open_synthetic_checkpoint(dir.path(), {});
            }).find("text_config.hidden_size: expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidRequest>([&] {
              open_synthetic_checkpoint(kEveryRole, synthetic(1, {99}));
            }).find("layer 99 does not exist"),
            std::string::npos);
  // A model runs every layer: a partial set is refused, not a missing-tensor crash.
  CpuReferenceBackend be(1);
  EXPECT_NE(error_of<InvalidRequest>([&] {
              Model m(open_synthetic_checkpoint(kEveryRole, synthetic(1, {12})), be);
            }).find("only some layers"),
            std::string::npos);
}

}  // namespace
}  // namespace flashdesk
