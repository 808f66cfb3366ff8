// RoPE frequencies: plain powers of rope_theta on window-only layers, the YaRN blend of
// compress_rope_theta on compressed layers, with the correction range worked out by hand for
// the full-size config (low 15, high 25).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/model/rope_freqs.h"

namespace flashdesk {
namespace {

TextConfig full_size() {
  return load_model_config(std::string(FD_SOURCE_DIR) + "/assets/configs/deepseek-v4.1-flash.json")
      .text;
}

TEST(RopeFreqs, WindowLayersUsePlainRopeTheta) {
  const TextConfig t = full_size();  // rope dim 64, theta 10000
  const auto f = rope_inv_freq(t, 0);
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i < 32; ++i)
    EXPECT_NEAR(f[i], std::pow(10000.0, -2.0 * i / 64), 2e-7 * f[i]) << i;
}

TEST(RopeFreqs, CompressedLayersBlendYarnBetweenFifteenAndTwentyFive) {
  // c(rot) = 64 ln(65536 / (2 pi rot)) / (2 ln 160000): c(32) = 15.45 -> low 15,
  // c(1) = 24.71 -> high 25. ramp = clamp((i - 15) / 10, 0, 1), f' = f/16 ramp + f (1 - ramp).
  const TextConfig t = full_size();
  const auto f = rope_inv_freq(t, 2);
  for (int i = 0; i < 32; ++i) {
    const double base = std::pow(160000.0, -2.0 * i / 64);
    const double ramp = std::clamp((i - 15) / 10.0, 0.0, 1.0);
    EXPECT_NEAR(f[i], base / 16 * ramp + base * (1 - ramp), 4e-7 * base) << i;
  }
  EXPECT_NEAR(f[0], 1.0f, 0.0f);  // i = 0 is untouched
}

TEST(RopeFreqs, NoOriginalSeqLenMeansNoYarn) {
  TextConfig t = full_size();
  t.rope_scaling.original_max_position = 0;  // what an absent rope_scaling means (ModelArgs)
  const auto f = rope_inv_freq(t, 2);
  for (int i = 0; i < 32; ++i)
    EXPECT_NEAR(f[i], std::pow(160000.0, -2.0 * i / 64), 2e-7 * f[i]) << i;
}

}  // namespace
}  // namespace flashdesk
