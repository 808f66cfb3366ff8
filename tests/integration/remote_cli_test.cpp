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
  r = run_cli("chat --remote " + url + " --api-key k-123 --session 12345 --data-dir " +
              (std::filesystem::temp_directory_path() / "flashdesk-remote-no-session").string() +
              " < /dev/null");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("12345"), std::string::npos) << r.output;
  std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                              "flashdesk-remote-no-session");
}

// `chat --remote --session`: the conversation is stored locally and resumed by a later process
// against another server that has never seen it (a new process on a fresh data folder), which
// answers from the history the client resent out of its store.
TEST(RemoteCli, SessionKeepsTheHistoryLocallyAndResumesIt) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("flashdesk-remote-session-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto input = dir.string() + "-input.txt";
  const std::string common = " --thinking off --json --data-dir " + dir.string();
  int64_t id = 0;
  {
    ServerProcess server(kModelDir);
    std::ofstream(input) << "Hi! My name is Quinn.\nWhat is 12 + 30?\n";
    const auto r =
        run_cli("chat --remote " + server.url("/v1") + " --session new" + common + " < " + input);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto lines = json_lines(r.output);
    ASSERT_EQ(lines.size(), 3u) << r.output;
    id = lines[0]["session_id"];
    EXPECT_EQ(lines[2]["session_id"], id);
  }
  ServerProcess server(kModelDir);
  std::ofstream(input) << "What is my name?\n";
  const auto r = run_cli("chat --remote " + server.url("/v1") + " --session " + std::to_string(id) +
                         common + " < " + input);
  std::filesystem::remove(input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = json_lines(r.output);
  ASSERT_EQ(lines.size(), 1u) << r.output;
  EXPECT_NE(lines[0]["answer"].get<std::string>().find("Quinn"), std::string::npos) << r.output;
  EXPECT_EQ(lines[0]["stats"]["reused_tokens"], 0) << "the new server had none of it cached";

  // The same three questions in one in-memory chat: the resumed prompt is that chat's last one.
  std::ofstream(input) << "Hi! My name is Quinn.\nWhat is 12 + 30?\nWhat is my name?\n";
  const auto memory =
      run_cli("chat --remote " + server.url("/v1") + " --thinking off --json < " + input);
  std::filesystem::remove(input);
  const auto turns = json_lines(memory.output);
  ASSERT_EQ(turns.size(), 3u) << memory.output;
  EXPECT_EQ(lines[0]["stats"]["prompt_tokens"], turns[2]["stats"]["prompt_tokens"]);
  EXPECT_EQ(lines[0]["answer"], turns[2]["answer"]);

  const auto show =
      run_cli("sessions show " + std::to_string(id) + " --json --data-dir " + dir.string());
  ASSERT_EQ(show.exit_code, 0) << show.output;
  const json stored = json::parse(show.output);
  ASSERT_EQ(stored["messages"].size(), 6u) << show.output;
  EXPECT_EQ(stored["messages"][4]["text"], "What is my name?");
  EXPECT_EQ(stored["messages"][5]["text"], lines[0]["answer"]);
  EXPECT_EQ(stored["messages"][5]["status"], "complete");
  EXPECT_EQ(stored["model_fingerprint"].get<std::string>().rfind("remote:flash-tiny@http://", 0),
            0u)
      << show.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flashdesk::testing
#endif  // FD_HAVE_SERVER
