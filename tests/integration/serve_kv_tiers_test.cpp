// `flashdesk-cli serve` with its conversations' KV behind the live slots: the window pool brings
// back a conversation whose live KV went to another (exactly: the same answers as a server that
// kept every conversation live), and the SSD blocks bring it back after a restart. Real server
// processes and curl.
#ifdef FD_HAVE_SERVER
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/server_process.h"

namespace flashdesk::testing {
namespace {

using nlohmann::json;

const std::string kModelDir = std::string(FD_SOURCE_DIR) + "/assets/models/flash-tiny";
constexpr int kBlockTokens = 32;
constexpr int kWindow = 128;  // flash-tiny's sliding window: a restore from blocks replays it

json ask(const ServerProcess& server, const json& messages, const json& extra) {
  json body = {{"model", "flash-tiny"}, {"messages", messages}, {"max_tokens", 200}};
  body.update(extra);
  const HttpReply r = server.request("/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false);
}

int cached(const json& answer) {
  return answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string content(const json& answer) {
  return answer["choices"][0]["message"]["content"].get<std::string>();
}

// A folder for one test's KV blocks, removed afterwards.
struct DataDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("flashdesk-kv-tiers-" + std::to_string(::getpid()) + "-" +
                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
  DataDir() { std::filesystem::remove_all(path); }
  ~DataDir() { std::filesystem::remove_all(path); }
};

struct Conversation {
  json messages = json::array();
  json options;
  int prompt = 0, completion = 0;  // the last turn's usage
};

// Three conversations take turns on a server with one live slot: each turn's slot held another
// one. The pool restores each exactly where its live KV was (chat mode: prompt and answer but
// the answer's last token; thinking mode: up to the prompt's <think>), so the answers are those of
// a server with a live slot for each and no KV store. Not those of a server that recomputes every
// prompt: a conversation computed turn by turn keeps, at exactly tied index scores, the entries of
// rows as wide as each turn's prompt (docs/numerics.md "Top-k"), and a prompt computed in one go
// may keep others (on the demo model of 1982 steps, one conversation's third answer).
TEST(ServeKvTiers, EvictedConversationComesBackFromThePoolWithTheSameAnswers) {
  DataDir dir;
  ServerProcess cached_server(kModelDir, {"--keep", "1", "--data-dir", dir.path.string(),
                                          "--block-tokens", std::to_string(kBlockTokens)});
  ServerProcess live_server(kModelDir, {"--keep", "3", "--kv-store", "off"});
  Conversation chat{.options = {{"thinking", {{"type", "disabled"}}}}};
  Conversation thinking{.options = {{"reasoning_effort", "low"}}};
  // Sampled hot, an answer's ids may not be what its text encodes to (the first answer here: 12
  // ids, 13 when its text is encoded): the rendering repeats them only because the server
  // remembers them (sampled_answers.h).
  Conversation sampled{
      .options = {{"thinking", {{"type", "disabled"}}}, {"temperature", 2.0}, {"seed", 2}}};
  const std::vector<std::string> questions = {"Hi! My name is Quinn.", "What is 12 + 30?",
                                              "What is my name?"};
  for (size_t turn = 0; turn < questions.size(); ++turn) {
    for (Conversation* c : {&chat, &thinking, &sampled}) {
      c->messages.push_back({{"role", "user"}, {"content", questions[turn]}});
      const json a = ask(cached_server, c->messages, c->options);
      const json reference = ask(live_server, c->messages, c->options);
      EXPECT_EQ(cached(a), cached(reference)) << "turn " << turn << ": " << a << reference;
      EXPECT_EQ(content(a), content(reference)) << "turn " << turn;
      EXPECT_EQ(a["choices"][0]["message"]["reasoning_content"],
                reference["choices"][0]["message"]["reasoning_content"]);
      const bool is_chat = c != &thinking;
      if (turn == 0)
        EXPECT_EQ(cached(a), 0);
      else
        EXPECT_EQ(cached(a), is_chat ? c->prompt + c->completion - 1 : c->prompt - 1) << a;
      c->prompt = a["usage"]["prompt_tokens"];
      c->completion = a["usage"]["completion_tokens"];
      c->messages.push_back({{"role", "assistant"}, {"content", content(a)}});
    }
  }
  // Only the first turn of each conversation computes its whole prompt. The other six come back
  // from the pool: whole blocks from the SSD and the rest from the window pool, which gives
  // nothing to a turn whose restored tokens end at a block's end (on the demo model of 2017
  // steps, the sampled conversation's third turn), but something to at least four of them.
  const std::string log = cached_server.log();
  EXPECT_EQ(occurrences(log, "(0 cached"), 3) << "only the first turns miss the pool:\n" << log;
  EXPECT_LE(occurrences(log, ", 0 from the window pool"), 3 + 2) << "the window pool served:\n"
                                                                 << log;
}

// A long conversation (a system prompt of a few hundred tokens) is continued by a new server
// process on the same data folder: its whole blocks come from the SSD, of which the last window
// is replayed, and only the rest is computed.
TEST(ServeKvTiers, ConversationComesBackFromTheSsdAfterARestart) {
  DataDir dir;
  const std::vector<std::string> args = {"--data-dir", dir.path.string(), "--block-tokens",
                                         std::to_string(kBlockTokens)};
  std::string system = "You are a helpful assistant. Remember these facts.";
  for (int i = 0; i < 12; ++i)
    system += " Fact " + std::to_string(i) + ": the box number " + std::to_string(i) + " holds " +
              std::to_string(3 * i + 1) + " red circles.";
  const json options = {{"thinking", {{"type", "disabled"}}}};
  json messages = {{{"role", "system"}, {"content", system}},
                   {{"role", "user"}, {"content", "Hi! My name is Quinn."}}};
  int live_tokens = 0;
  {
    ServerProcess first(kModelDir, args);
    const json a = ask(first, messages, options);
    live_tokens =
        a["usage"]["prompt_tokens"].get<int>() + a["usage"]["completion_tokens"].get<int>() - 1;
    messages.push_back({{"role", "assistant"}, {"content", content(a)}});
    ASSERT_EQ(first.stop(), 0);  // queued blocks are written before it exits
  }
  messages.push_back({{"role", "user"}, {"content", "What is my name?"}});
  ServerProcess second(kModelDir, args);
  const json resumed = ask(second, messages, options);
  const int blocks = live_tokens / kBlockTokens * kBlockTokens;
  ASSERT_GT(blocks, kWindow) << "the conversation must outgrow the replayed window";
  EXPECT_EQ(cached(resumed), blocks - kWindow) << resumed;
  EXPECT_NE(second.log().find("from SSD"), std::string::npos) << second.log();

  ServerProcess uncached(kModelDir, {"--kv-store", "off"});
  const json reference = ask(uncached, messages, options);
  EXPECT_EQ(cached(reference), 0);
  EXPECT_EQ(content(resumed), content(reference));
}

}  // namespace
}  // namespace flashdesk::testing
#endif  // FD_HAVE_SERVER
