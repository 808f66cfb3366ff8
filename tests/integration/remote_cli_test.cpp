// `generate` and `chat` with --remote against FlashDesk's own `serve` (a real server process on
// loopback): the same answers as the local model, the history resent with its KV reused, and the
// errors a user sees.
#ifdef FD_HAVE_SERVER
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/cli_runner.h"
#include "tests/integration/server_process.h"

namespace flashdesk::testing {
namespace {

using nlohmann::json;

const std::string kSource = FD_SOURCE_DIR;
const std::string kModelDir = kSource + "/assets/models/flash-tiny";
const std::string kImage = kSource + "/assets/eval/demo/images/image-0.png";

// The JSON objects a --json command printed, one a line.
std::vector<json> json_lines(const std::string& output) {
  std::vector<json> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_object()) lines.push_back(j);
  }
  return lines;
}

TEST(RemoteCli, GenerateAnswersAsTheLocalModelDoes) {
  ServerProcess server(kModelDir, {"--api-key", "k-123"});
  const std::string remote = " --remote " + server.url("/v1") + " --api-key k-123";
  const std::string local = " --model " + kModelDir;
  for (const std::string& turn :
       {std::string(" --prompt 'What is 4821 + 3377?' --effort 50"),
        " --prompt 'What colour is the square?' --thinking off --image " + kImage}) {
    const auto far = run_cli("generate" + remote + turn + " --json");
    const auto near = run_cli("generate" + local + turn + " --json");
    ASSERT_EQ(far.exit_code, 0) << far.output;
    ASSERT_EQ(near.exit_code, 0) << near.output;
    const auto a = json_lines(far.output), b = json_lines(near.output);
    ASSERT_EQ(a.size(), 1u) << far.output;
    ASSERT_EQ(b.size(), 1u) << near.output;
    EXPECT_EQ(a[0]["answer"], b[0]["answer"]) << turn;
    EXPECT_EQ(a[0]["thinking"], b[0]["thinking"]) << turn;
    EXPECT_EQ(a[0]["stats"]["prompt_tokens"], b[0]["stats"]["prompt_tokens"]) << turn;
    EXPECT_EQ(a[0]["stats"]["generated_tokens"], b[0]["stats"]["generated_tokens"]) << turn;
  }
}

TEST(RemoteCli, ChatResendsTheHistoryAndTheServerReusesItsKv) {
  ServerProcess server(kModelDir);
  const auto input = std::filesystem::temp_directory_path() / "flashdesk-remote-chat-input.txt";
  std::ofstream(input) << "Hi! My name is Quinn.\nWhat is 12 + 30?\nWhat is my name?\n";
  const auto r =
      run_cli("chat --remote " + server.url("/v1") + " --thinking off --json < " + input.string());
  std::filesystem::remove(input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto turns = json_lines(r.output);
  ASSERT_EQ(turns.size(), 3u) << r.output;
  for (size_t i = 1; i < turns.size(); ++i) {
    const json& before = turns[i - 1]["stats"];
    EXPECT_EQ(turns[i]["stats"]["reused_tokens"],
              before["prompt_tokens"].get<int>() + before["generated_tokens"].get<int>() - 1)
        << r.output;
  }
  EXPECT_NE(turns[2]["answer"].get<std::string>().find("Quinn"), std::string::npos) << r.output;
}

TEST(RemoteCli, ErrorsSayWhatIsWrong) {
  ServerProcess server(kModelDir, {"--api-key", "k-123"});
  const std::string url = server.url("/v1");
  auto r = run_cli("generate --remote " + url + " --api-key wrong --prompt hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("API key"), std::string::npos) << r.output;
  r = run_cli("generate --remote " + url + " --api-key k-123 --remote-model gpt-4o --prompt hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  r = run_cli("generate --remote " + url + " --model " + kModelDir + " --prompt hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--model applies to a local model"), std::string::npos) << r.output;
  r = run_cli("generate --remote http://127.0.0.1:1/v1 --prompt hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot reach"), std::string::npos) << r.output;
  r = run_cli("generate --remote ftp://example.com --prompt hi");
  EXPECT_NE(r.output.find("http:// or https://"), std::string::npos) << r.output;
  r = run_cli("chat --remote " + url + " --api-key k-123 --session new < /dev/null");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--session is not available with --remote"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace flashdesk::testing
#endif  // FD_HAVE_SERVER
