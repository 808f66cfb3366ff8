// The CLI's GPU backends end to end: `--backend cuda` answers like the CPU backend (greedy
// flash-tiny, the same ids) where there is a GPU, and elsewhere fails with the driver's reason
// and offers the CPU; malformed GPU names are clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/ops/cuda/cuda_devices.h"
#include "tests/integration/cli_runner.h"

namespace flashdesk::test {
namespace {

using flashdesk::testing::run_cli;

std::string generate_args(const std::string& backend) {
  const std::string model =
      (std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny").string();
  return "generate --model " + model + " --backend " + backend +
         " --prompt \"Hi! My name is Quinn.\" --thinking off --max-tokens 12 "
         "--json";
}

// The "answer_ids" array of a --json answer.
std::string answer_ids(const std::string& json) {
  const size_t at = json.find("\"answer_ids\"");
  if (at == std::string::npos) return "";
  return json.substr(at, json.find(']', at) - at + 1);
}

TEST(CudaCli, BackendCudaAnswersOrSaysWhyNot) {
  const auto r = run_cli(generate_args("cuda"));
  if (cuda_devices().empty()) {
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(cuda_unavailable_reason()), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--backend cpu"), std::string::npos) << r.output;
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto cpu = run_cli(generate_args("cpu"));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_FALSE(answer_ids(r.output).empty()) << r.output;
  EXPECT_EQ(answer_ids(r.output), answer_ids(cpu.output));
}

// Routed experts of layers >= 1 in host memory, computed on the CPU: the same answer, and the
// CLI says where the experts went.
TEST(CudaCli, HostExpertsAnswerAsTheDevice) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const auto hybrid = run_cli(generate_args("cuda") + " --host-experts-from 1");
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.output;
  EXPECT_NE(hybrid.output.find("placement: routed experts of layers 1-"), std::string::npos)
      << hybrid.output;
  const auto device = run_cli(generate_args("cuda") + " --host-experts-from none");
  ASSERT_EQ(device.exit_code, 0) << device.output;
  EXPECT_EQ(device.output.find("placement:"), std::string::npos) << device.output;
  EXPECT_EQ(answer_ids(hybrid.output), answer_ids(device.output));
}

TEST(CudaCli, MalformedHostExpertLayersAreClearErrors) {
  for (const char* bad : {"x", "-3", "2x"}) {
    const auto r = run_cli(generate_args("cpu") + " --host-experts-from " + bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.output.find("--host-experts-from must be auto, none or a layer number"),
              std::string::npos)
        << r.output;
  }
}

TEST(CudaCli, MalformedGpuNamesAreClearErrors) {
  const auto bad = run_cli(generate_args("cuda:x"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("must be a GPU number"), std::string::npos) << bad.output;
  const auto missing = run_cli(generate_args("cuda:99"));
  EXPECT_NE(missing.exit_code, 0);
  const bool explained = missing.output.find("there is no GPU 99") != std::string::npos ||
                         missing.output.find(cuda_unavailable_reason()) != std::string::npos;
  EXPECT_TRUE(explained) << missing.output;
}

}  // namespace
}  // namespace flashdesk::test
