// Image preprocessing (engine/vision/image_preprocess.h): processed sizes derived by hand from
// docs/model-spec.md §8, the letterbox against PIL's ImageOps.pad (tools/vision_goldens.py), and
// the patch layout and normalisation on a picture whose pixels encode their position.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/checkpoint/safetensors.h"
#include "engine/util/numeric.h"
#include "engine/vision/image_preprocess.h"

namespace flashdesk::test {
namespace {

const std::filesystem::path kData = std::filesystem::path(FD_SOURCE_DIR) / "tests/data/vision";

VisionConfig full_size() {
  return VisionConfig{};
}  // the V4.1 defaults
VisionConfig flash_tiny() {
  VisionConfig v;
  v.max_image_tokens = 64;
  v.min_pixels = 28224;
  return v;
}

TEST(ProcessedSize, FullSizeSquareTopsOutAt31Cells) {
  // 31 x 31 cells = 31 * 32 + 2 = 994 tokens <= 1024; 32 x 32 would be 1058. 31 * 42 = 1302.
  EXPECT_EQ(processed_size({4000, 4000}, full_size()), (PixelSize{1302, 1302}));
  EXPECT_EQ(llm_grid({1302, 1302}, full_size()).token_count(), 994u);
}

TEST(ProcessedSize, SmallImagesAreUpscaledToMinPixels) {
  // 100 x 100 < 28224: scale sqrt(2.8224) = 1.68 -> 168 x 168, a multiple of 14.
  EXPECT_EQ(processed_size({100, 100}, flash_tiny()), (PixelSize{168, 168}));
  // 544 x 544 = 295936 exactly: no upscale, round up to 546 (39 patches, 13 cells).
  EXPECT_EQ(processed_size({544, 544}, full_size()), (PixelSize{546, 546}));
}

TEST(ProcessedSize, TokenBudgetKeepsAspect) {
  // 300 x 500 -> 308 x 504 (8 x 12 cells = 106 tokens > 64). r = 308/504: max_w =
  // sqrt(62 / r + 0.25) - 0.5 = 9.59 -> 9 cols, max_h = 5.86 -> 5 rows; ratio = min(9*42/504,
  // 5*42/308) = 0.6818; sides floor(308 * 0.6818 / 14) * 14 = 196, floor(504 * 0.6818 / 14) * 14 =
  // 336.
  EXPECT_EQ(processed_size({300, 500}, flash_tiny()), (PixelSize{196, 336}));
  const ImageGrid g = llm_grid({196, 336}, flash_tiny());
  EXPECT_EQ(g.rows, 5);
  EXPECT_EQ(g.cols, 8);
  EXPECT_LE(g.token_count(), 64u);
}

TEST(ProcessedSize, DemoImagesAreAlreadyProcessed) {
  EXPECT_EQ(processed_size({168, 168}, flash_tiny()), (PixelSize{168, 168}));
}

TEST(Letterbox, MatchesPilImageOpsPad) {
  const RgbImage in = load_image(kData / "shapes-500x300.png");
  const RgbImage got = letterbox(in, 336, 196);
  SafetensorsFile golden(kData / "vision-golden.safetensors");
  const SafetensorsEntry* e = golden.find("image1.pixels");
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->shape, (std::vector<int64_t>{196, 336, 3}));
  ASSERT_EQ(got.pixels.size(), e->nbytes);
  size_t differ = 0;
  for (size_t i = 0; i < e->nbytes; ++i) differ += got.pixels[i] != golden.data(*e)[i];
  EXPECT_EQ(differ, 0u) << "bytes differing from PIL";
  // 500x300 into 336x196: height round(300/500*336) = 202 > 196, so width round(500/300*196)
  // = 327 and x offset round(4.5) = 4 (half to even): columns 0-3 and 331-335 are grey.
  EXPECT_EQ(got.at(3, 100)[0], 127);
  EXPECT_NE(got.at(4, 100)[0], 127);
  EXPECT_EQ(got.at(331, 100)[1], 127);
}

TEST(Preprocess, PatchesAreRowMajorChannelMajorAndNormalised) {
  // 28 x 42 picture (a multiple of 14, over min_pixels = 1): R = x, G = y, B = 7.
  VisionConfig vc;
  vc.min_pixels = 1;
  RgbImage im{42, 28, {}};
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 42; ++x) im.pixels.insert(im.pixels.end(), {uint8_t(x), uint8_t(y), 7});
  const PreprocessedImage p = preprocess_image(im, vc);
  ASSERT_EQ(p.vit_h, 2);
  ASSERT_EQ(p.vit_w, 3);
  EXPECT_EQ(p.grid.rows, 1);
  EXPECT_EQ(p.grid.cols, 1);
  auto norm = [](int v) { return round_bf16((static_cast<float>(v) / 255.0f - 0.5f) / 0.5f); };
  // Patch 4 = (row 1, col 1): its pixel (y 5, x 9) is image (19, 23).
  const float* patch = p.patches.data() + 4 * 588;
  EXPECT_EQ(patch[0 * 196 + 5 * 14 + 9], norm(23));  // R = x
  EXPECT_EQ(patch[1 * 196 + 5 * 14 + 9], norm(19));  // G = y
  EXPECT_EQ(patch[2 * 196 + 5 * 14 + 9], norm(7));
  EXPECT_EQ(norm(0), -1.0f);
  EXPECT_EQ(norm(255), 1.0f);
}

}  // namespace
}  // namespace flashdesk::test
