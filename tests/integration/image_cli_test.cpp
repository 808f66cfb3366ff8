// `--image` on the CLI as a user runs it with the demo model: generate answers about a picture,
// logits writes the image span and differs from the same prompt without the picture, and bad
// image files are clear errors naming the file; a WebP of the picture gets the PNG's answer.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/vision/webp_decode.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/integration/cli_runner.h"

namespace flashdesk {
namespace {

using testing::run_cli;

const std::string kSource = FD_SOURCE_DIR;
const std::string kModel = " --model " + kSource + "/assets/models/flash-tiny";
const std::string kImage = kSource + "/assets/eval/demo/images/image-0.png";

std::vector<float> floats(const SafetensorsFile& f, const std::string& name) {
  const SafetensorsEntry* e = f.find(name);
  std::vector<float> v(e ? e->nbytes / 4 : 0);
  if (e) std::memcpy(v.data(), f.data(*e), e->nbytes);
  return v;
}

TEST(ImageCli, GenerateAnswersWithAnImage) {
  const auto r = run_cli("generate" + kModel + " --image " + kImage +
                         " --prompt 'How many shapes are there?' --max-tokens 60 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"answer\""), std::string::npos) << r.output;
}

// A lossless WebP of the picture decodes to the same pixels, so the answer is the same.
TEST(ImageCli, WebpGivesThePngsAnswer) {
  if (!webp_supported()) GTEST_SKIP() << "this build has no libwebp (Debian: libwebp-dev)";
  const std::string ask = " --prompt 'How many shapes are there?' --max-tokens 60 --json";
  const auto png = run_cli("generate" + kModel + " --image " + kImage + ask);
  const auto webp = run_cli("generate" + kModel + " --image " + kSource +
                            "/tests/data/vision/image-0.webp" + ask);
  ASSERT_EQ(png.exit_code, 0) << png.output;
  ASSERT_EQ(webp.exit_code, 0) << webp.output;
  const auto a = nlohmann::json::parse(png.output), b = nlohmann::json::parse(webp.output);
  ASSERT_FALSE(a.at("answer_ids").empty()) << png.output;
  EXPECT_EQ(b.at("reasoning_ids"), a.at("reasoning_ids"));
  EXPECT_EQ(b.at("answer_ids"), a.at("answer_ids"));
}

TEST(ImageCli, LogitsRecordTheSpanAndDependOnTheImage) {
  testing::TempDir dir;
  const std::string with = (dir.path() / "with.safetensors").string();
  const std::string without = (dir.path() / "without.safetensors").string();
  auto r =
      run_cli("logits" + kModel + " --image " + kImage + " --prompt 'What colour?' --out " + with);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("logits" + kModel + " --prompt 'What colour?' --out " + without);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SafetensorsFile a(with), b(without);
  const SafetensorsEntry* spans = a.find("image_spans");
  ASSERT_NE(spans, nullptr);
  std::vector<int64_t> s(2);
  std::memcpy(s.data(), a.data(*spans), 16);
  EXPECT_EQ(s[1] - s[0], 22);  // a 168x168 picture: 4x4 cells, 4*5+2 positions
  EXPECT_NE(floats(a, "prefill_logits"), floats(b, "prefill_logits"));
}

TEST(ImageCli, BadImagesAreClearErrors) {
  auto r = run_cli("generate" + kModel + " --image /no/such.png --prompt hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/no/such.png"), std::string::npos) << r.output;
  const std::string config = kSource + "/assets/models/flash-tiny/config.json";
  r = run_cli("generate" + kModel + " --image " + config + " --prompt hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unsupported image format"), std::string::npos) << r.output;
  r = run_cli("logits" + kModel + " --image " + kImage + " --ids x --out /dev/null");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--image needs --prompt"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace flashdesk
