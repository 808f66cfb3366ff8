// `flashdesk-cli chat --session new|ID --data-dir DIR --json`: a session started by one process is
// continued by another, whose answer's stats show the KV read from the SSD blocks.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "storage/session_store.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

// Runs `chat` with `lines` on stdin; returns the JSON lines it printed.
std::vector<nlohmann::json> chat(const std::string& args, const std::vector<std::string>& lines) {
  std::string input;
  for (const auto& l : lines) input += l + "\\n";
  const std::string cmd = "printf '" + input + "' | " + FD_CLI_PATH + " chat --model " +
                          FD_SOURCE_DIR + "/assets/models/flash-tiny --threads 2 --json " +
                          "--thinking off --max-tokens 3 --block-tokens 32 " + args;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  EXPECT_EQ(::pclose(pipe), 0) << out;
  std::vector<nlohmann::json> objects;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') objects.push_back(nlohmann::json::parse(line));
  return objects;
}

TEST(ChatSessionCli, SessionContinuesInANewProcessFromSsd) {
  testing::TempDir dir;
  const std::string data = "--data-dir " + dir.path().string();
  std::string text;
  for (int i = 0; i < 30; ++i)
    text += "The lamp by the window was lit at " + std::to_string(i) + ". ";
  const auto first = chat("--session new " + data, {text, "And then?"});
  ASSERT_EQ(first.size(), 3u);
  const int64_t id = first[0].at("session_id").get<int64_t>();
  EXPECT_EQ(first[1].at("session_id").get<int64_t>(), id);
  EXPECT_GT(first[2].at("stats").at("reused_ram_tokens").get<int64_t>(), 0);

  const auto second = chat("--session " + std::to_string(id) + " " + data, {"Why?"});
  ASSERT_EQ(second.size(), 1u);
  const auto& stats = second[0].at("stats");
  const int64_t ssd = stats.at("reused_ssd_tokens").get<int64_t>();
  EXPECT_GT(ssd, 128);  // past one window (flash-tiny's W = 128)
  EXPECT_EQ(ssd % 32, 0);
  EXPECT_EQ(stats.at("reused_ram_tokens").get<int64_t>(), 0);
  EXPECT_EQ(stats.at("replayed_tokens").get<int64_t>(), 128);
  EXPECT_EQ(stats.at("computed_tokens").get<int64_t>() + ssd,
            stats.at("prompt_tokens").get<int64_t>());
  EXPECT_GT(stats.at("bytes_read").get<int64_t>(), 0);

  // An unknown session is a clear error, not a new one.
  const std::string cmd = std::string(FD_CLI_PATH) + " chat --model " + FD_SOURCE_DIR +
                          "/assets/models/flash-tiny --session 999 " + data +
                          " < /dev/null > /dev/null 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
}

TEST(ChatSessionCli, ImagesAreStoredWithTheSessionAndItsKvRestored) {
  testing::TempDir dir;
  const std::string data = "--data-dir " + dir.path().string();
  const std::string images = std::string(FD_SOURCE_DIR) + "/assets/eval/demo/images/";
  std::string text;
  for (int i = 0; i < 30; ++i)
    text += "The lamp by the window was lit at " + std::to_string(i) + ". ";
  // --image goes with the first message, /image with the next one.
  const auto first = chat("--session new " + data + " --image " + images + "image-0.png",
                          {text, "/image " + images + "image-1.png", "And this one?"});
  ASSERT_EQ(first.size(), 3u);
  const int64_t id = first[0].at("session_id").get<int64_t>();
  EXPECT_GT(first[2].at("stats").at("reused_ram_tokens").get<int64_t>(), 0);

  const auto second = chat("--session " + std::to_string(id) + " " + data, {"Why?"});
  ASSERT_EQ(second.size(), 1u);
  const auto& stats = second[0].at("stats");
  EXPECT_GT(stats.at("reused_ssd_tokens").get<int64_t>(), 128);
  EXPECT_EQ(
      stats.at("computed_tokens").get<int64_t>() + stats.at("reused_ssd_tokens").get<int64_t>(),
      stats.at("prompt_tokens").get<int64_t>());

  SessionStore store(dir.layout());
  const std::vector<Message> messages = store.messages(id);
  ASSERT_EQ(messages.size(), 6u);
  ASSERT_EQ(messages[0].attachments.size(), 1u);
  ASSERT_EQ(messages[2].attachments.size(), 1u);
  EXPECT_NE(messages[0].attachments[0].digest, messages[2].attachments[0].digest);
  EXPECT_TRUE(messages[4].attachments.empty());
}

}  // namespace
}  // namespace flashdesk::storage
