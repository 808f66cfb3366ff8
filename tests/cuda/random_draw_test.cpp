// A synthetic checkpoint's linears drawn on the GPU (CudaBackend::draw_linear, random_draw.h):
// byte for byte the host's generation (Checkpoint::tensor, make-random's bytes) for every
// drawable weight of the every-role model and its Engram tables, for a rank's row slice, with the
// flagged units handed to the host, and at the full V4.1-Flash shapes.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/checkpoint/synthetic_checkpoint.h"
#include "engine/ops/cuda/random_draw.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk {
namespace {

using cuda::kDrawMarginLog2;
using Format = RandomTensorPlan::Format;

std::filesystem::path config_asset(const std::string& name) {
  return std::filesystem::path(FD_SOURCE_DIR) / "assets" / "configs" / name;
}

class CudaRandomDrawTest : public test::CudaOpTest {
 protected:
  // The bytes of a device tensor.
  std::vector<uint8_t> host_bytes(const Tensor& t) {
    std::vector<uint8_t> out(t.nbytes());
    gpu().read(t, out.data(), out.size());
    return out;
  }

  // Draws rows [first, first + rows) of `name` and compares them, and their scale rows, with the
  // host's bytes of the whole tensor.
  void expect_drawn_as_host(const Checkpoint& ckpt, const std::string& name, int64_t first = 0,
                            int64_t rows = -1) {
    const std::optional<RandomWeightRecipe> recipe = ckpt.random_recipe(name);
    ASSERT_TRUE(recipe) << name;
    if (rows < 0) rows = recipe->rows;
    const LinearWeight lw = gpu().draw_linear(*recipe, first, rows);
    ASSERT_TRUE(lw.data.defined()) << name;
    EXPECT_EQ(lw.out, rows) << name;
    EXPECT_EQ(lw.in, recipe->cols) << name;
    const TensorView w = ckpt.tensor(name);
    const size_t row_bytes = w.nbytes / static_cast<size_t>(recipe->rows);
    const std::vector<uint8_t> got = host_bytes(lw.data);
    ASSERT_EQ(got.size(), row_bytes * static_cast<size_t>(rows)) << name;
    EXPECT_EQ(std::memcmp(got.data(), w.data + static_cast<size_t>(first) * row_bytes, got.size()),
              0)
        << name << " rows " << first << "+" << rows;
    if (!recipe->scale.empty()) {
      const TensorView s = ckpt.tensor(recipe->scale);
      const size_t scale_row = s.nbytes / static_cast<size_t>(s.dim(0));
      const int64_t first_scale_row = recipe->format == Format::Fp8Tiles ? first / 32 : first;
      const std::vector<uint8_t> got_scale = host_bytes(lw.scale);
      EXPECT_EQ(
          std::memcmp(got_scale.data(), s.data + static_cast<size_t>(first_scale_row) * scale_row,
                      got_scale.size()),
          0)
          << recipe->scale;
      ckpt.release_tensor(recipe->scale);
    } else {
      EXPECT_FALSE(lw.scale.defined()) << name;
    }
    ckpt.release_tensor(name);
  }
};

// On by default (FLASHDESK_CUDA_DRAW_WEIGHTS unset); off, nothing is drawn (the host generates).
TEST_F(CudaRandomDrawTest, OnByDefaultAndOffDrawsNothing) {
  const auto ckpt = open_synthetic_checkpoint(config_asset("test-every-role.json"), {3, {}, 2});
  const auto recipe = ckpt->random_recipe("layers.2.attn.wq_b.weight");
  ASSERT_TRUE(recipe);
  if (!std::getenv("FLASHDESK_CUDA_DRAW_WEIGHTS")) {
    EXPECT_TRUE(gpu().draw_linear(*recipe, 0, recipe->rows).data.defined());
    EXPECT_EQ(gpu().draw_stats().draws, 1u);
  }
  gpu().set_draw_weights(false);
  const uint64_t before = gpu().draw_stats().draws;
  EXPECT_FALSE(gpu().draw_linear(*recipe, 0, recipe->rows).data.defined());
  EXPECT_EQ(gpu().draw_stats().draws, before);
}

// Every weight of the every-role model the checkpoint offers: FP4 experts, FP8 tiles (wo_a's
// and the head's shapes included) and BF16 matrices.
TEST_F(CudaRandomDrawTest, EveryRoleWeightsAreTheHostBytes) {
  const auto ckpt = open_synthetic_checkpoint(config_asset("test-every-role.json"), {3, {}, 2});
  gpu().set_draw_weights(true);
  int formats[4] = {};
  for (const std::string& name : ckpt->tensor_names()) {
    const auto recipe = ckpt->random_recipe(name);
    if (!recipe || recipe->format == Format::Fp8Rows) continue;  // tables: below
    ++formats[static_cast<int>(recipe->format)];
    expect_drawn_as_host(*ckpt, name);
  }
  EXPECT_GT(formats[static_cast<int>(Format::Fp4Rows)], 0);
  EXPECT_GT(formats[static_cast<int>(Format::Fp8Tiles)], 0);
  EXPECT_GT(formats[static_cast<int>(Format::Plain)], 0);
  EXPECT_EQ(gpu().draw_stats().draws,
            static_cast<uint64_t>(formats[0] + formats[1] + formats[2] + formats[3]));
}

// The Engram tables, drawn in chunks of 37 rows (the last one short) into host buffers; with the
// wide margin too, the flagged rows then written by the host there. Linears are not drawn so.
TEST_F(CudaRandomDrawTest, EngramTablesAreTheHostBytes) {
  const auto ckpt = open_synthetic_checkpoint(config_asset("test-every-role.json"), {6, {}, 2});
  gpu().set_draw_weights(true);
  gpu().set_draw_table_chunk_rows(37);
  int tables = 0;
  for (int margin : {kDrawMarginLog2, -34}) {
    gpu().set_draw_margin_log2(margin);
    for (const std::string& name : ckpt->tensor_names()) {
      const auto recipe = ckpt->random_recipe(name);
      if (!recipe || recipe->format != Format::Fp8Rows) continue;
      ++tables;
      std::vector<uint8_t> codes(static_cast<size_t>(recipe->rows * recipe->cols)),
          scales(static_cast<size_t>(recipe->rows * recipe->cols / 32));
      ASSERT_TRUE(gpu().draw_into_host(*recipe, codes.data(), scales.data())) << name;
      const TensorView w = ckpt->tensor(name), s = ckpt->tensor(recipe->scale);
      ASSERT_EQ(codes.size(), w.nbytes) << name;
      ASSERT_EQ(scales.size(), s.nbytes) << name;
      EXPECT_EQ(std::memcmp(codes.data(), w.data, w.nbytes), 0) << name;
      EXPECT_EQ(std::memcmp(scales.data(), s.data, s.nbytes), 0) << recipe->scale;
      EXPECT_GT(recipe->rows, 37) << "a table of one chunk tests no chunking";
      ckpt->release_tensor(name);
      ckpt->release_tensor(recipe->scale);
    }
  }
  EXPECT_EQ(tables, 4);  // two Engram layers, each margin
  const auto linear = ckpt->random_recipe("layers.2.attn.wq_b.weight");
  std::vector<uint8_t> unused(16);
  EXPECT_FALSE(gpu().draw_into_host(*linear, unused.data(), unused.data()));
  EXPECT_GT(gpu().draw_stats().host_units, 0u);
}

// A rank's share: rows from a 32-row group on (FP8 tiles), any row (FP4, BF16).
TEST_F(CudaRandomDrawTest, RowSlicesAreTheHostRows) {
  const auto ckpt = open_synthetic_checkpoint(config_asset("test-every-role.json"), {4, {}, 2});
  gpu().set_draw_weights(true);
  expect_drawn_as_host(*ckpt, "layers.2.attn.wq_b.weight", 128, 256);      // FP8 tiles
  expect_drawn_as_host(*ckpt, "layers.2.ffn.experts.3.w1.weight", 5, 17);  // FP4 rows
  expect_drawn_as_host(*ckpt, "embed.weight", 7, 100);                     // BF16
}

// A margin wide enough that many units are flagged: the host's rows replace them, and the bytes
// are still the host's.
TEST_F(CudaRandomDrawTest, FlaggedUnitsAreTheHostBytes) {
  const auto ckpt = open_synthetic_checkpoint(config_asset("test-every-role.json"), {5, {}, 2});
  gpu().set_draw_weights(true);
  gpu().set_draw_margin_log2(-34);
  for (const char* name : {"layers.8.attn.wq_b.weight", "layers.8.ffn.experts.0.w2.weight",
                           "layers.8.ffn.gate.weight", "head.weight"})
    if (ckpt->random_recipe(name)) expect_drawn_as_host(*ckpt, name);
  const auto& st = gpu().draw_stats();
  EXPECT_GE(st.draws, 3u);
  EXPECT_GT(st.host_units, 0u) << "the wide margin flags units";
  EXPECT_LT(st.host_units, st.units);
}

// The full V4.1-Flash shapes of one layer and the head (about 0.7 G values): the GPU's own libm
// against the host's, where a margin too narrow would show as a differing byte.
TEST_F(CudaRandomDrawTest, FullShapesAreTheHostBytes) {
  FD_REQUIRE_FULL_SHAPES();
  const auto ckpt =
      open_synthetic_checkpoint(config_asset("deepseek-v4.1-flash.json"), {0, {2}, 0});
  gpu().set_draw_weights(true);
  const std::string p = "layers.2.";
  std::vector<std::string> names = {
      p + "attn.wq_a.weight", p + "attn.wq_b.weight", p + "attn.wkv.weight", p + "attn.wo_a.weight",
      p + "attn.wo_b.weight", p + "ffn.gate.weight",  "head.weight"};
  for (int e = 0; e < 16; ++e)
    for (const char* m : {"w1", "w2", "w3"})
      names.push_back(p + "ffn.experts." + std::to_string(e) + "." + m + ".weight");
  for (const std::string& n : names)
    if (ckpt->random_recipe(n)) expect_drawn_as_host(*ckpt, n);
  const auto& st = gpu().draw_stats();
  EXPECT_GE(st.draws, names.size() - 2);
  std::printf("drawn: %llu linears, %llu units, %llu of them by the host\n",
              static_cast<unsigned long long>(st.draws), static_cast<unsigned long long>(st.units),
              static_cast<unsigned long long>(st.host_units));
}

}  // namespace
}  // namespace flashdesk
