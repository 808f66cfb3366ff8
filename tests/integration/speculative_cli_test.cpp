// `--speculative auto|dspark|off` end to end with the demo model and its shipped DSpark head:
// auto (the default) decodes speculatively only on a GPU backend, dspark always, off never; the
// greedy answer is the same in every case, and a bad word is a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/ops/cuda/cuda_devices.h"
#include "tests/integration/cli_runner.h"

namespace flashdesk::test {
namespace {

using flashdesk::testing::run_cli;

std::string generate_args(const std::string& backend, const std::string& speculative) {
  const std::string model =
      (std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny").string();
  return "generate --model " + model + " --backend " + backend +
         " --threads 2 --prompt \"Hi! My name is Quinn.\" --thinking off "
         "--max-tokens 16 --json" +
         speculative;
}

// The answer object of a --json run (the one line that is JSON).
nlohmann::json answer_of(const std::string& output) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("{")) return nlohmann::json::parse(line);
  ADD_FAILURE() << "no JSON answer in: " << output;
  return {};
}

TEST(SpeculativeCli, AutoIsOffOnTheCpuAndDsparkVerifiesTheSameAnswer) {
  const auto automatic = run_cli(generate_args("cpu", ""));
  ASSERT_EQ(automatic.exit_code, 0) << automatic.output;
  const auto automatic_named = run_cli(generate_args("cpu", " --speculative auto"));
  const auto dspark = run_cli(generate_args("cpu", " --speculative dspark"));
  const auto off = run_cli(generate_args("cpu", " --speculative off"));
  ASSERT_EQ(dspark.exit_code, 0) << dspark.output;
  const nlohmann::json a = answer_of(automatic.output), d = answer_of(dspark.output),
                       o = answer_of(off.output);
  EXPECT_EQ(a["stats"]["draft_rounds"], 0);  // the default: auto, off on a CPU backend
  EXPECT_EQ(answer_of(automatic_named.output)["stats"]["draft_rounds"], 0);
  EXPECT_EQ(o["stats"]["draft_rounds"], 0);
  EXPECT_GT(d["stats"]["verifies"].get<int64_t>(), 0);
  EXPECT_GT(d["stats"]["accepted_tokens"].get<int64_t>(), 0);
  EXPECT_FALSE(a["answer_ids"].empty());
  EXPECT_EQ(d["answer_ids"], a["answer_ids"]);
  EXPECT_EQ(o["answer_ids"], a["answer_ids"]);
}

TEST(SpeculativeCli, AutoIsOnOnAGpu) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const auto gpu = run_cli(generate_args("cuda", ""));
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_GT(answer_of(gpu.output)["stats"]["verifies"].get<int64_t>(), 0);
  const auto off = run_cli(generate_args("cuda", " --speculative off"));
  EXPECT_EQ(answer_of(off.output)["stats"]["draft_rounds"], 0);
}

TEST(SpeculativeCli, OtherWordsAreClearErrors) {
  const auto r = run_cli(generate_args("cpu", " --speculative on"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--speculative must be auto, dspark or off, not 'on'"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace flashdesk::test
