// Dequantisation against hand-computed values (E4M3 / E2M1 tables of docs/model-spec.md §2.2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/checkpoint/dequant.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/util/numeric.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

TEST(Dequant, Fp8TilesUseTheirOwnScale) {
  // A 33 x 33 weight: tiles (0,0) [32x32], (0,1) [32x1], (1,0) [1x32], (1,1) [1x1].
  const int64_t rows = 33, cols = 33;
  std::vector<uint8_t> codes(rows * cols, 0x38);  // 1.0
  codes[0] = 0xBC;                                // -1.5
  codes[1] = 0x01;                                // 2^-9 (smallest subnormal)
  codes[32 * cols + 32] = 0x7E;                   // 448
  // Scales: 2^0, 2^1 | 2^-1, 2^3 (E8M0 codes 127, 128, 126, 130).
  const uint8_t scales[4] = {127, 128, 126, 130};
  std::vector<float> out(rows * cols);
  dequant_fp8(codes.data(), scales, rows, cols, 32, 32, out.data());
  EXPECT_EQ(out[0], -1.5f);
  EXPECT_EQ(out[1], 0x1p-9f);
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[31 * cols + 31], 1.0f);
  EXPECT_EQ(out[5 * cols + 32], 2.0f);      // tile (0,1)
  EXPECT_EQ(out[32 * cols + 7], 0.5f);      // tile (1,0)
  EXPECT_EQ(out[32 * cols + 32], 3584.0f);  // 448 * 8
}

TEST(Dequant, Fp8RowBlocks) {
  // Engram layout: 2 rows x 64 columns, one scale per row per 32 columns.
  std::vector<uint8_t> codes(128, 0x40);         // 2.0
  const uint8_t scales[4] = {127, 125, 129, 0};  // 1, 1/4, 4, 2^-127
  std::vector<float> out(128);
  dequant_fp8(codes.data(), scales, 2, 64, 1, 32, out.data());
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[32], 0.5f);
  EXPECT_EQ(out[64], 8.0f);
  EXPECT_EQ(out[127], 0x1p-126f);
}

TEST(Dequant, Fp4LowNibbleIsTheEvenColumn) {
  // One row of 64 logical columns = 32 bytes, two scales.
  std::vector<uint8_t> packed(32, 0x00);
  packed[0] = 0x21;                      // col 0: code 1 = 0.5, col 1: code 2 = 1.0
  packed[1] = 0xF7;                      // col 2: code 7 = 6.0, col 3: code 15 = -6.0
  packed[16] = 0xA5;                     // col 32: code 5 = 3.0, col 33: code 10 = -1.0
  const uint8_t scales[2] = {126, 129};  // 0.5, 4
  std::vector<float> out(64);
  dequant_fp4(packed.data(), scales, 1, 64, out.data());
  EXPECT_EQ(out[0], 0.25f);
  EXPECT_EQ(out[1], 0.5f);
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_EQ(out[3], -3.0f);
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[32], 12.0f);
  EXPECT_EQ(out[33], -4.0f);
}

TEST(Dequant, Bf16IsExact) {
  const uint8_t bytes[6] = {0x80, 0x3F, 0x40, 0xC0, 0x49, 0x40};  // 1.0, -3.0, 3.140625
  float out[3];
  dequant_bf16(bytes, 3, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ(out[2], 3.140625f);
}

TEST(Dequant, CheckpointTensorsByFormat) {
  testing::TempDir dir;
  write_random_checkpoint(testing::config_asset("test-every-role.json"), dir.path(),
                          testing::random_options(5));
  const auto ckpt = Checkpoint::open(dir.path());
  // FP8 dense: [128, 256] with scale [4, 8]; element (40, 70) lies in tile (1, 2).
  const auto wq_a = dequantize_tensor(*ckpt, "layers.3.attn.wq_a.weight");
  ASSERT_EQ(wq_a.size(), 128u * 256u);
  const TensorView w = ckpt->tensor("layers.3.attn.wq_a.weight");
  const TensorView s = ckpt->tensor("layers.3.attn.wq_a.scale");
  EXPECT_EQ(wq_a[40 * 256 + 70],
            e4m3_to_f32(w.data[40 * 256 + 70]) * e8m0_to_f32(s.data[1 * 8 + 2]));
  // FP4 expert w2: logical [256, 64] stored [256, 32] + [256, 2].
  const auto w2 = dequantize_tensor(*ckpt, "layers.0.ffn.experts.1.w2.weight");
  ASSERT_EQ(w2.size(), 256u * 64u);
  const TensorView p = ckpt->tensor("layers.0.ffn.experts.1.w2.weight");
  const TensorView ps = ckpt->tensor("layers.0.ffn.experts.1.w2.scale");
  EXPECT_EQ(w2[9 * 64 + 35],
            e2m1_to_f32(e2m1_high(p.data[9 * 32 + 17])) * e8m0_to_f32(ps.data[9 * 2 + 1]));
  // BF16 and F32 pass through.
  EXPECT_EQ(dequantize_tensor(*ckpt, "layers.0.attn_norm.weight").size(), 256u);
  const auto sink = dequantize_tensor(*ckpt, "layers.0.attn.attn_sink");
  float first;
  std::memcpy(&first, ckpt->tensor("layers.0.attn.attn_sink").data, 4);
  EXPECT_EQ(sink[0], first);
  // Engram table: rows of 32 with one scale each.
  const auto table = dequantize_tensor(*ckpt, "layers.1.engram.embed.weight");
  EXPECT_EQ(table.size(), 6126u * 32u);
}

}  // namespace
}  // namespace flashdesk
