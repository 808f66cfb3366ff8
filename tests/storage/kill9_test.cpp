// Reliability under kill -9: a child process logs tokens (or spills KV blocks) and is killed with
// SIGKILL at a random moment; then the database must open, every token the child saw committed
// must be there (in order, nothing else), and no damaged block may ever be loaded. Token rounds
// kill only once the answer has begun (every other round: once a commit was reported), so each
// round checks something; the printed counts are the measured ones.
// Rounds per scenario: FLASHDESK_KILL9_ROUNDS (default 10, so CI kills 20 times in a few seconds;
// the long run uses e.g. 200). Seeded by FLASHDESK_KILL9_SEED (default 1) for reproducible moments.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>

#include "child_process.h"
#include "kv_store_test_util.h"
#include "storage/kv_block_file.h"
#include "storage/session_store.h"
#include "storage/token_log.h"

namespace flashdesk::storage {
namespace {

using namespace testing;
using namespace std::chrono_literals;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

int rounds() {
  return std::max(1, env_int("FLASHDESK_KILL9_ROUNDS", 10));
}

// Kills the child after a random delay and returns what it reported from now until its end.
std::string kill_at_random(Child& child, std::mt19937& rng, int min_ms, int max_ms) {
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::uniform_int_distribution<int>(min_ms, max_ms)(rng)));
  ::kill(child.pid(), SIGKILL);
  std::string report = child.read_all();
  const int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child ended on its own: " << report;
  return report;
}

// The text of synthetic token i ("t17 "). Built step by step: GCC 12 warns falsely on `"t" + ...`.
std::string token_text(int64_t i) {
  std::string s = "t";
  s += std::to_string(i);
  s += ' ';
  return s;
}

std::string line(std::string_view word, int64_t n) {
  std::string s(word);
  s += ' ';
  s += std::to_string(n);
  s += '\n';
  return s;
}

// The child: logs synthetic tokens one by one (as generation does) until it is killed.
void generate_until_killed(Child& child, const StorageLayout& layout, int64_t session) {
  TokenLogOptions options;
  options.on_commit = [&](const CommitEvent& e) {
    child.report(line("committed", e.committed_tokens));
  };
  TokenLog log(layout.database(), options);
  const AnswerHandle a = log.begin_answer(session);
  child.report(line("message", a.message_id));
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  for (int64_t i = 0; i < 1'000'000; ++i) {
    log.append(a, std::vector<TokenId>{synthetic_token(i)}, token_text(i));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
  }
}

struct TokenRound {
  int64_t message_id = -1;  // -1: killed before the answer began
  int64_t committed = 0;    // the most the child heard was committed
};

TokenRound parse_token_report(const std::string& report) {
  TokenRound r;
  std::istringstream in(report);
  std::string word;
  int64_t n;
  while (in >> word >> n) {
    if (word == "message") r.message_id = n;
    if (word == "committed") r.committed = std::max(r.committed, n);
  }
  return r;
}

TEST(Kill9, TokenLoggingLosesNoCommittedToken) {
  TempDir dir;
  const StorageLayout layout = dir.layout();
  int64_t session;
  {
    SessionStore store(layout);
    session = store.create_session("kill -9", test_settings());
  }  // no database connection may cross fork()
  std::mt19937 rng(static_cast<unsigned>(env_int("FLASHDESK_KILL9_SEED", 1)));
  std::vector<int64_t> recovered_counts;
  int64_t last_message = -1, last_count = 0, committed_lost = 0, most_committed = 0;
  int rounds_after_commit = 0;
  for (int round = 0; round < rounds(); ++round) {
    Child child([&](Child& c) { generate_until_killed(c, layout, session); });
    // Even rounds die anywhere in the answer, odd ones after at least one commit was reported.
    const bool after_commit = round % 2 == 1;
    std::string report = child.read_until(after_commit ? "committed " : "message ");
    report += kill_at_random(child, rng, 0, 150);
    const TokenRound r = parse_token_report(report);
    ASSERT_GE(r.message_id, 0) << "round " << round << ": the answer never began: " << report;
    if (after_commit) {
      ASSERT_GT(r.committed, 0) << "round " << round << ": " << report;
    }
    SessionStore store(layout, {.repair = true});  // opens, folds the crashed answer
    const auto messages = store.messages(session);
    auto it = std::find_if(messages.begin(), messages.end(),
                           [&](const Message& m) { return m.id == r.message_id; });
    ASSERT_NE(it, messages.end()) << "round " << round << ": the answer's message is gone";
    EXPECT_EQ(it->status, MessageStatus::interrupted);
    const int64_t n = static_cast<int64_t>(it->token_ids.size());
    EXPECT_GE(n, r.committed) << "round " << round << ": committed tokens were lost";
    committed_lost += std::max<int64_t>(0, r.committed - n);
    most_committed = std::max(most_committed, r.committed);
    rounds_after_commit += r.committed > 0 ? 1 : 0;
    std::string text;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(it->token_ids[i], synthetic_token(i)) << "round " << round << " token " << i;
      text += token_text(i);
    }
    EXPECT_EQ(it->text, text) << "round " << round;
    recovered_counts.push_back(n);
    last_message = r.message_id;
    last_count = n;
  }
  EXPECT_EQ(committed_lost, 0);
  EXPECT_GE(rounds_after_commit, rounds() / 2);  // the odd rounds at least
  // The last crashed answer can be continued where it stopped, and then completes.
  {
    TokenLog log(layout.database());
    const AnswerHandle more = log.continue_answer(last_message);
    log.append(more, std::vector<TokenId>{synthetic_token(last_count)}, token_text(last_count));
    log.finish(more);
  }
  SessionStore store(layout);
  for (const Message& m : store.messages(session))
    if (m.id == last_message) {
      EXPECT_EQ(m.status, MessageStatus::complete);
      EXPECT_EQ(static_cast<int64_t>(m.token_ids.size()), last_count + 1);
      EXPECT_EQ(m.token_ids.back(), synthetic_token(last_count));
    }
  std::sort(recovered_counts.begin(), recovered_counts.end());
  std::printf(
      "kill -9 during token logging: %d rounds, all killed after the answer began, %d after a "
      "commit (most committed: %lld tokens); database opened every time; tokens recovered per "
      "answer: min %lld, median %lld, max %lld; committed tokens lost: %lld\n",
      rounds(), rounds_after_commit, static_cast<long long>(most_committed),
      static_cast<long long>(recovered_counts.front()),
      static_cast<long long>(recovered_counts[recovered_counts.size() / 2]),
      static_cast<long long>(recovered_counts.back()), static_cast<long long>(committed_lost));
}

// The child: spills 228 KB blocks of fresh prompts until it is killed, reporting each written key.
void spill_until_killed(Child& child, const StorageLayout& layout, int round) {
  KvBlockStoreOptions o;
  o.tokens_per_block = 256;
  KvBlockStore store(layout, o);
  for (int p = 0; p < 10'000; ++p) {
    const auto prompt = prompt_tokens(static_cast<uint64_t>(round) * 100'000 + p, 2 * 256);
    const auto keys = chain_block_keys("m", prompt, {}, 256);
    auto futures = put_prompt(store, "m", prompt);
    for (size_t i = 0; i < futures.size(); ++i)
      if (futures[i].get().status == WriteStatus::written) child.report(keys[i].hex() + "\n");
  }
}

TEST(Kill9, BlockSpillNeverLeavesADamagedBlockToLoad) {
  TempDir dir;
  const StorageLayout layout = dir.layout();
  { SessionStore store(layout); }
  std::mt19937 rng(static_cast<unsigned>(env_int("FLASHDESK_KILL9_SEED", 1)) + 7);
  int64_t written_total = 0, temp_removed = 0, orphans_removed = 0, rows_dropped = 0;
  for (int round = 0; round < rounds(); ++round) {
    Child child([&](Child& c) { spill_until_killed(c, layout, round); });
    const std::string report = kill_at_random(child, rng, 5, 150);
    SessionStore sessions(layout);  // the database opens
    KvBlockStoreOptions o;
    o.tokens_per_block = 256;
    o.repair = true;
    KvBlockStore store(layout, o);
    temp_removed += store.reconcile_report().temp_files;
    orphans_removed += store.reconcile_report().orphan_files;
    rows_dropped += store.reconcile_report().rows_without_files;
    std::istringstream in(report);
    std::vector<BlockKey> written;
    for (std::string hex; in >> hex;)
      if (auto k = BlockKey::from_hex(hex)) written.push_back(*k);
    written_total += static_cast<int64_t>(written.size());
    // Every block the child saw written loads, with the right bytes.
    for (const BlockRead& r : store.get(written)) {
      ASSERT_EQ(r.status, ReadStatus::hit) << "round " << round << ": " << r.message;
      ASSERT_TRUE(std::ranges::equal(r.payload(), payload_for(r.key, 256))) << "round " << round;
    }
    EXPECT_EQ(store.stats().reads_corrupt, 0) << "round " << round;
  }
  // Finally every indexed block, from every round: none is damaged.
  KvBlockStoreOptions o;
  o.tokens_per_block = 256;
  KvBlockStore store(layout, o);
  SessionStore sessions(layout);
  Database db = Database::open(layout.database());
  std::vector<BlockKey> all;
  for (Query q = db.query("SELECT key FROM kv_blocks"); q.step();)
    all.push_back(*BlockKey::from_hex(q.text(0)));
  for (const BlockRead& r : store.get(all)) {
    EXPECT_EQ(r.status, ReadStatus::hit) << r.message;
    EXPECT_TRUE(std::ranges::equal(r.payload(), payload_for(r.key, 256)));
  }
  std::printf(
      "kill -9 during KV spill: %d rounds, %lld blocks reported written (all loaded "
      "intact), %zu blocks indexed at the end (all intact); start-up removed %lld "
      "temporary files, %lld orphan files, %lld rows without files; damaged blocks "
      "loaded: 0\n",
      rounds(), static_cast<long long>(written_total), all.size(),
      static_cast<long long>(temp_removed), static_cast<long long>(orphans_removed),
      static_cast<long long>(rows_dropped));
}

}  // namespace
}  // namespace flashdesk::storage
