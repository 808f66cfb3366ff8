// The token write-ahead log: every generated token is queued as it is produced and a background
// writer commits the queue to SQLite in groups, at most `commit_interval` (50 ms) apart, so a crash
// loses at most the tokens of the last group. The answer's message exists from the first moment
// with status `interrupted`; finish() folds the log into it and marks it complete. After a crash,
// SessionStore's repair folds what was committed and the message stays `interrupted`, ready to be
// continued with continue_answer().
//
// Goals: append() never blocks generation on the disk; commits are bounded in time; a failing disk
// (full, busy) is reported and retried, never fatal. Non-goals: reading sessions (SessionStore).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "storage/session_types.h"
#include "storage/storage_layout.h"

namespace flashdesk::storage {

class Database;

struct AnswerHandle {
  int64_t answer_id = 0;
  int64_t message_id = 0;
};

// After a group commit: how many of the answer's logged tokens (counted from begin/continue) are
// durable now.
struct CommitEvent {
  int64_t answer_id = 0;
  int64_t committed_tokens = 0;
};

struct TokenLogOptions {
  std::chrono::milliseconds commit_interval{50};
  Clock clock = system_now_ms;
  // Called on the writer thread after each commit (keep it short).
  std::function<void(const CommitEvent&)> on_commit;
};

class TokenLog {
 public:
  // Opens its own connection to the (already migrated) session database.
  explicit TokenLog(const std::filesystem::path& database, TokenLogOptions options = {});
  ~TokenLog();  // commits what is queued; unfinished answers stay logged (repair folds them)
  TokenLog(const TokenLog&) = delete;
  TokenLog& operator=(const TokenLog&) = delete;

  // A new assistant message at the session's next ordinal, logged into until finish().
  AnswerHandle begin_answer(int64_t session_id);
  // Logs further tokens into an existing assistant message (continuing an interrupted answer).
  AnswerHandle continue_answer(int64_t message_id);
  // Queues tokens and their detokenised text (answer part and thinking part). Never blocks on I/O.
  void append(const AnswerHandle& answer, std::span<const TokenId> ids, std::string_view text,
              std::string_view thinking = {});
  // Returns once everything appended before the call is committed; throws the writer's error.
  void flush();
  // Flushes, folds the log into the message and sets its status and how it ended (the time its
  // reasoning took, whether the user stopped it).
  void finish(const AnswerHandle& answer, MessageStatus status = MessageStatus::complete,
              const AnswerEnd& end = {});

  // The writer's latest failure (e.g. "disk full"), cleared by the next successful commit.
  std::optional<std::string> last_error() const;

 private:
  struct Pending {
    std::vector<TokenId> ids;
    std::string text;
    std::string thinking;
  };
  struct Task {
    std::function<void(Database&)> run;
    std::function<void(std::exception_ptr)> fail;
  };

  void run_writer();
  // Commits the groups in one transaction; on failure puts them back and returns the error.
  std::exception_ptr commit_pending(Database& db, std::map<int64_t, Pending>& pending);
  void restore_pending_locked(std::map<int64_t, Pending>&& failed);
  template <class R>
  R run_on_writer(std::function<R(Database&)> fn);

  TokenLogOptions options_;
  std::unique_ptr<Database> db_;  // used by the writer thread only

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<int64_t, Pending> pending_;           // by answer id, not yet committed
  std::map<int64_t, int64_t> committed_tokens_;  // by open answer id
  std::vector<Task> tasks_;
  std::optional<std::string> last_error_;
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace flashdesk::storage
