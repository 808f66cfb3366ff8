// `--synthetic-weights SEED` run as a user would: inspect of a config alone, the logits of the
// written make-random checkpoint from the config and seed alone, generate with the tokenizer
// beside the config, and bad options as messages.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "engine/checkpoint/safetensors.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/integration/cli_runner.h"

namespace flashdesk {
namespace {

using testing::run_cli;

const std::string kEveryRole = testing::config_asset("test-every-role.json").string();
const std::string kFlashTinyConfig =
    (std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny/config.json").string();

std::string fingerprint_of(const std::string& output) {
  const std::string key = "fingerprint ";
  const size_t at = output.find(key);
  return at == std::string::npos ? "" : output.substr(at + key.size(), 64);
}

bool has(const std::string& output, const std::string& text) {
  return output.find(text) != std::string::npos;
}

TEST(SyntheticCli, InspectOpensTheConfigWithoutFiles) {
  const auto r = run_cli("inspect " + kEveryRole + " --synthetic-weights 77");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "synthetic; fingerprint")) << r.output;
  EXPECT_TRUE(has(r.output, "weights: synthetic (make-random seed 77)")) << r.output;
  const std::string fp = fingerprint_of(r.output);
  EXPECT_EQ(fp.size(), 64u);
  EXPECT_EQ(fingerprint_of(run_cli("inspect " + kEveryRole + " --synthetic-weights 77").output),
            fp);  // another process
  EXPECT_NE(fingerprint_of(run_cli("inspect " + kEveryRole + " --synthetic-weights 78").output),
            fp);
  const auto partial =
      run_cli("inspect " + kEveryRole + " --synthetic-weights 77 --synthetic-layers 12");
  ASSERT_EQ(partial.exit_code, 0) << partial.output;
  EXPECT_TRUE(has(partial.output, "partial: holds layers 8, 12 only")) << partial.output;
}

std::vector<uint8_t> tensor_bytes(const std::string& file, const std::string& name) {
  const SafetensorsFile f(file);
  const SafetensorsEntry* e = f.find(name);
  if (e == nullptr) return {};
  return {f.data(*e), f.data(*e) + e->nbytes};
}

TEST(SyntheticCli, LogitsEqualTheWrittenCheckpoints) {
  testing::TempDir dir;
  const auto w = run_cli("make-random --config " + kEveryRole + " --out " +
                         (dir / "model").string() + " --seed 3");
  ASSERT_EQ(w.exit_code, 0) << w.output;
  std::ofstream(dir / "ids.txt") << "5 17 300 2 99 41 7 7 8 120 33 64\n";
  const std::string common = " --ids " + (dir / "ids.txt").string() + " --decode 2 --out ";
  const auto file = run_cli("logits --model " + (dir / "model").string() + common +
                            (dir / "file.safetensors").string());
  ASSERT_EQ(file.exit_code, 0) << file.output;
  const auto synth = run_cli("logits --model " + kEveryRole + " --synthetic-weights 3" + common +
                             (dir / "synth.safetensors").string());
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  for (const char* name : {"prefill_logits", "decode_logits", "decode_argmax"}) {
    const auto want = tensor_bytes((dir / "file.safetensors").string(), name);
    EXPECT_FALSE(want.empty()) << name;
    EXPECT_EQ(tensor_bytes((dir / "synth.safetensors").string(), name), want) << name;
  }
}

TEST(SyntheticCli, GenerateFindsTheTokenizerBesideTheConfig) {
  const auto r = run_cli("generate --model " + kFlashTinyConfig +
                         " --synthetic-weights 1 --thinking off --max-tokens 3 --json --prompt hi");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "\"answer\"")) << r.output;
  // The every-role config has no tokenizer.json beside it.
  const auto none =
      run_cli("generate --model " + kEveryRole + " --synthetic-weights 1 --prompt hi");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_TRUE(has(none.output, "the config's folder has no tokenizer.json")) << none.output;
}

TEST(SyntheticCli, BadOptionsAreMessages) {
  const struct {
    std::string args, message;
  } cases[] = {
      {"inspect " + kEveryRole + " --synthetic-weights seven",
       "--synthetic-weights: expected a seed"},
      {"inspect " + kEveryRole + " --synthetic-weights=-1", "--synthetic-weights: expected a seed"},
      {"inspect " + kEveryRole + " --synthetic-layers 3",
       "--synthetic-layers needs --synthetic-weights"},
      {"inspect " + kEveryRole + " --synthetic-weights 1 --synthetic-layers 2,x",
       "--synthetic-layers: 'x' is not a layer number"},
      {"inspect " + kEveryRole + " --synthetic-weights 1 --synthetic-layers 99",
       "layer 99 does not exist"},
      {"logits --model /nonexistent/config.json --synthetic-weights 1 --ids 1 --out x",
       "/nonexistent/config.json"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_TRUE(has(r.output, c.message)) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace flashdesk
