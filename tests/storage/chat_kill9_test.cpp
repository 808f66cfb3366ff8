// kill -9 of `flashdesk-cli chat --session` at random moments (while it loads, prefills,
// generates, logs tokens and spills KV blocks), several times over one session: the database
// opens, every message is complete or interrupted, no damaged block is ever loaded, and the
// session continues from its SSD blocks. Odd rounds are killed within the first half of an
// uninterrupted round's time and must have been running; even rounds anywhere up to past its end
// (some die spilling, some finish). Rounds: FD_KILL9_ROUNDS (default 4; the reliability script
// tests/storage/chat_kill9.sh runs 25).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "engine/runtime/chat_engine.h"
#include "storage/kv_block_file.h"
#include "storage/persistent_chat.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

const std::string kModel = std::string(FD_SOURCE_DIR) + "/assets/models/flash-tiny";

PersistentChatOptions options(const testing::TempDir& dir) {
  PersistentChatOptions o{.layout = dir.layout()};
  o.blocks.tokens_per_block = 32;
  return o;
}

// Starts the CLI on the session with `input` as stdin; returns its pid.
pid_t start_chat(const testing::TempDir& dir, int64_t session, const std::string& input,
                 int round) {
  const std::string in_file = (dir.path() / "stdin.txt").string();
  { std::ofstream(in_file) << input << "\nAnd what else?\n"; }  // two turns: spill mid-run
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int in = ::open(in_file.c_str(), O_RDONLY);
  const int null = ::open("/dev/null", O_WRONLY);
  ::dup2(in, 0);
  ::dup2(null, 1);
  ::dup2(null, 2);
  const std::string id = std::to_string(session), seed = std::to_string(round);
  const std::string data = dir.path().string();
  ::execl(FD_CLI_PATH, FD_CLI_PATH, "chat", "--model", kModel.c_str(), "--session", id.c_str(),
          "--data-dir", data.c_str(), "--thinking", "off", "--max-tokens", "300", "--temperature",
          "1", "--seed", seed.c_str(), "--block-tokens", "32", "--threads", "1",
          static_cast<char*>(nullptr));
  ::_exit(127);
}

int rounds() {
  const char* env = std::getenv("FD_KILL9_ROUNDS");
  return env ? std::max(1, std::atoi(env)) : 4;
}

TEST(ChatKill9, SessionSurvivesKillsDuringGenerationAndSpill) {
  testing::TempDir dir;
  auto engine = ChatEngine::load(kModel, EngineOptions{.threads = 2});
  TurnOptions t;
  t.mode = ThinkingMode::kChat;
  t.generation.max_new_tokens = 4;
  int64_t session = 0;
  {
    PersistentChat chat(*engine, options(dir));
    session = chat.create_session("kill9", chat.settings_for(t));
  }
  auto round_text = [](int r) {
    std::string text;
    for (int i = 0; i < 8; ++i)
      text += "Round " + std::to_string(r) + " line " + std::to_string(i) + " of the log. ";
    return text;
  };
  // One round uninterrupted gives the duration the kill moments are drawn from.
  using Steady = std::chrono::steady_clock;
  const auto t0 = Steady::now();
  int status = 0;
  ::waitpid(start_chat(dir, session, round_text(0), 0), &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto full_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0);
  std::mt19937 rng(20261130);
  int killed = 0, must_kill = 0;
  for (int r = 1; r <= rounds(); ++r) {
    const pid_t pid = start_chat(dir, session, round_text(r), r);
    const bool early = r % 2 == 1;
    must_kill += early ? 1 : 0;
    const int64_t last = early ? full_ms.count() / 2 : full_ms.count() * 4 / 3;
    std::uniform_int_distribution<int64_t> moment(full_ms.count() / 20, last);
    std::this_thread::sleep_for(std::chrono::milliseconds(moment(rng)));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    const bool was_running = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    killed += was_running ? 1 : 0;
    if (early) {
      EXPECT_TRUE(was_running) << "round " << r << " finished before its early kill";
    }
    if (!was_running) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << r;
    }
  }
  std::printf("%d rounds, %d killed while running (the others had finished)\n", rounds(), killed);
  ASSERT_GE(killed, must_kill);

  PersistentChat chat(*engine, options(dir));
  chat.open_session(session);
  // Every stored block verifies (a write is atomic: temporary file, fsync, rename).
  std::vector<BlockKey> keys;
  for (const auto& f : std::filesystem::directory_iterator(
           dir.layout().kv_dir(), std::filesystem::directory_options::skip_permission_denied)) {
    if (f.is_directory()) {
      for (const auto& g : std::filesystem::directory_iterator(f.path()))
        if (auto k = key_from_block_file_name(g.path())) keys.push_back(*k);
    } else if (auto k = key_from_block_file_name(f.path())) {
      keys.push_back(*k);
    }
  }
  for (const BlockRead& r : chat.blocks().get(keys))
    EXPECT_NE(r.status, ReadStatus::corrupt) << r.message;
  // Messages alternate user / assistant (a kill may leave a user message without an answer).
  int interrupted = 0, answers = 0;
  for (const Message& m : chat.messages()) {
    EXPECT_TRUE(m.status == MessageStatus::complete || m.status == MessageStatus::interrupted);
    answers += m.role == Role::assistant ? 1 : 0;
    interrupted += m.status == MessageStatus::interrupted ? 1 : 0;
  }
  std::printf("%d answers stored, %d interrupted, %zu blocks verified\n", answers, interrupted,
              keys.size());
  const SessionTurn turn = chat.send("Still there?", t);
  EXPECT_EQ(turn.corrupt_blocks, 0);
  EXPECT_EQ(chat.blocks().stats().reads_corrupt, 0);
  EXPECT_EQ(turn.turn.generation.stats.computed_tokens + turn.turn.generation.stats.reused_tokens,
            turn.turn.generation.stats.prompt_tokens);
}

}  // namespace
}  // namespace flashdesk::storage
