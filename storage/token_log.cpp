// The token write-ahead log's writer thread: group commits, ordered tasks, retry on failure.
#include "storage/token_log.h"

#include <utility>

#include "storage/answer_log.h"
#include "storage/schema.h"
#include "storage/sqlite_db.h"

namespace flashdesk::storage {

namespace {

constexpr const char* kSessionExists = "SELECT 1 FROM sessions WHERE id = ?1";
constexpr const char* kNextOrdinal =
    "SELECT COALESCE(MAX(ordinal), -1) + 1 FROM messages WHERE session_id = ?1";
constexpr const char* kInsertAnswerMessage =
    "INSERT INTO messages (session_id, ordinal, role, text, thinking, token_ids, status, "
    "created_ms, updated_ms) VALUES (?1, ?2, 'assistant', '', '', x'', 'interrupted', ?3, ?3)";
constexpr const char* kMessageForContinue =
    "SELECT session_id, role, (SELECT COUNT(*) FROM answers a WHERE a.message_id = m.id) "
    "FROM messages m WHERE id = ?1";
constexpr const char* kMarkInterrupted =
    "UPDATE messages SET status = 'interrupted', updated_ms = ?2 WHERE id = ?1";
constexpr const char* kInsertAnswer =
    "INSERT INTO answers (message_id, started_ms) VALUES (?1, ?2)";
constexpr const char* kTouchSession = "UPDATE sessions SET updated_ms = ?2 WHERE id = ?1";
constexpr const char* kSessionOfAnswer =
    "SELECT m.session_id FROM answers a JOIN messages m ON m.id = a.message_id WHERE a.id = ?1";
// A session deleted mid-answer takes its answer with it: the group is then dropped, not retried.
// A group can hold text and no token (a token's id and its text are appended separately and a
// commit may fall between them); the next group then starts at the same token index and extends
// that row instead of colliding with it. Only a row without tokens can be at that index (a row with
// tokens moves the next group's index past them), so its token ids are simply replaced.
constexpr const char* kInsertGroup =
    "INSERT INTO answer_tokens (answer_id, first, token_ids, text, thinking) "
    "SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM answers WHERE id = ?1) "
    "ON CONFLICT (answer_id, first) DO UPDATE SET token_ids = excluded.token_ids, "
    "text = answer_tokens.text || excluded.text, "
    "thinking = answer_tokens.thinking || excluded.thinking";

}  // namespace

TokenLog::TokenLog(const std::filesystem::path& database, TokenLogOptions options)
    : options_(std::move(options)),
      db_(std::make_unique<Database>(Database::open(database, {.create = false}))) {
  if (schema_version(*db_) != kSchemaVersion)
    throw FormatError(database.string(), "schema version " + std::to_string(schema_version(*db_)) +
                                             " is not " + std::to_string(kSchemaVersion) +
                                             ": open the database with SessionStore first");
  writer_ = std::thread([this] { run_writer(); });
}

TokenLog::~TokenLog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

template <class R>
R TokenLog::run_on_writer(std::function<R(Database&)> fn) {
  auto promise = std::make_shared<std::promise<R>>();
  std::future<R> result = promise->get_future();
  Task task;
  task.fail = [promise](std::exception_ptr error) { promise->set_exception(error); };
  task.run = [promise, fn = std::move(fn)](Database& db) {
    try {
      if constexpr (std::is_void_v<R>) {
        fn(db);
        promise->set_value();
      } else {
        promise->set_value(fn(db));
      }
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  };
  {
    std::lock_guard lock(mutex_);
    FD_CHECK(!stopping_, "TokenLog used while being destroyed");
    tasks_.push_back(std::move(task));
  }
  wake_.notify_all();
  return result.get();
}

AnswerHandle TokenLog::begin_answer(int64_t session_id) {
  return run_on_writer<AnswerHandle>([this, session_id](Database& db) {
    const int64_t now = options_.clock();
    Transaction tx(db);
    if (Query q = db.query(kSessionExists); !q.with(session_id).step())
      throw InvalidRequest("no session with id " + std::to_string(session_id));
    Query next = db.query(kNextOrdinal);
    next.with(session_id).step();
    db.query(kInsertAnswerMessage).with(session_id, next.int64(0), now).run();
    AnswerHandle handle{0, db.last_insert_rowid()};
    db.query(kInsertAnswer).with(handle.message_id, now).run();
    handle.answer_id = db.last_insert_rowid();
    db.query(kTouchSession).with(session_id, now).run();
    tx.commit();
    std::lock_guard lock(mutex_);
    committed_tokens_[handle.answer_id] = 0;
    return handle;
  });
}

AnswerHandle TokenLog::continue_answer(int64_t message_id) {
  return run_on_writer<AnswerHandle>([this, message_id](Database& db) {
    const int64_t now = options_.clock();
    Transaction tx(db);
    Query q = db.query(kMessageForContinue);
    if (!q.with(message_id).step())
      throw InvalidRequest("no message with id " + std::to_string(message_id));
    if (q.text(1) != "assistant")
      throw InvalidRequest("message " + std::to_string(message_id) + " is not an answer");
    if (q.int64(2) != 0)
      throw InvalidRequest("message " + std::to_string(message_id) + " is already being written");
    db.query(kMarkInterrupted).with(message_id, now).run();
    db.query(kInsertAnswer).with(message_id, now).run();
    AnswerHandle handle{db.last_insert_rowid(), message_id};
    db.query(kTouchSession).with(q.int64(0), now).run();
    tx.commit();
    std::lock_guard lock(mutex_);
    committed_tokens_[handle.answer_id] = 0;
    return handle;
  });
}

void TokenLog::append(const AnswerHandle& answer, std::span<const TokenId> ids,
                      std::string_view text, std::string_view thinking) {
  bool was_idle;
  {
    std::lock_guard lock(mutex_);
    if (committed_tokens_.count(answer.answer_id) == 0)
      throw InvalidRequest("answer " + std::to_string(answer.answer_id) + " is not open");
    was_idle = pending_.empty();
    Pending& p = pending_[answer.answer_id];
    p.ids.insert(p.ids.end(), ids.begin(), ids.end());
    p.text += text;
    p.thinking += thinking;
  }
  if (was_idle) wake_.notify_all();  // the writer starts the commit interval
}

void TokenLog::flush() {
  run_on_writer<void>([](Database&) {});
}

void TokenLog::finish(const AnswerHandle& answer, MessageStatus status, const AnswerEnd& end) {
  run_on_writer<void>([this, answer, status, end](Database& db) {
    const int64_t now = options_.clock();
    Transaction tx(db);
    int64_t session_id = -1;
    if (Query q = db.query(kSessionOfAnswer); q.with(answer.answer_id).step())
      session_id = q.int64(0);
    fold_answer(db, answer.answer_id, status, now, end);
    if (session_id >= 0) db.query(kTouchSession).with(session_id, now).run();
    tx.commit();
    std::lock_guard lock(mutex_);
    committed_tokens_.erase(answer.answer_id);
  });
}

std::optional<std::string> TokenLog::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

std::exception_ptr TokenLog::commit_pending(Database& db, std::map<int64_t, Pending>& pending) {
  std::vector<CommitEvent> events;
  std::vector<int64_t> vanished;  // answers whose session was deleted meanwhile
  try {
    Transaction tx(db);
    for (const auto& [answer, p] : pending) {
      int64_t first;
      {
        std::lock_guard lock(mutex_);
        auto it = committed_tokens_.find(answer);
        if (it == committed_tokens_.end()) continue;
        first = it->second;
      }
      db.query(kInsertGroup).with(answer, first, encode_token_ids(p.ids), p.text, p.thinking).run();
      if (db.changes() == 0)
        vanished.push_back(answer);
      else
        events.push_back({answer, first + static_cast<int64_t>(p.ids.size())});
    }
    tx.commit();
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    last_error_ = e.what();
    restore_pending_locked(std::move(pending));
    return std::current_exception();
  }
  {
    std::lock_guard lock(mutex_);
    for (const CommitEvent& e : events) committed_tokens_[e.answer_id] = e.committed_tokens;
    for (int64_t answer : vanished) committed_tokens_.erase(answer);
    last_error_.reset();
  }
  if (options_.on_commit)
    for (const CommitEvent& e : events) options_.on_commit(e);
  return nullptr;
}

void TokenLog::restore_pending_locked(std::map<int64_t, Pending>&& failed) {
  for (auto& [answer, old] : failed) {
    Pending& newer = pending_[answer];
    old.ids.insert(old.ids.end(), newer.ids.begin(), newer.ids.end());
    old.text += newer.text;
    old.thinking += newer.thinking;
    newer = std::move(old);
  }
}

void TokenLog::run_writer() {
  using Steady = std::chrono::steady_clock;
  Steady::time_point last_commit = Steady::now() - options_.commit_interval;
  std::unique_lock lock(mutex_);
  for (;;) {
    // Tasks run at once; tokens wait until the interval since the last commit has passed.
    for (;;) {
      if (stopping_ || !tasks_.empty()) break;
      const Steady::time_point due = last_commit + options_.commit_interval;
      if (!pending_.empty() && Steady::now() >= due) break;
      if (pending_.empty())
        wake_.wait(lock);
      else
        wake_.wait_until(lock, due);
    }
    std::map<int64_t, Pending> pending = std::exchange(pending_, {});
    std::vector<Task> tasks = std::exchange(tasks_, {});
    const bool stop = stopping_;
    lock.unlock();
    std::exception_ptr commit_error;
    if (!pending.empty()) {
      commit_error = commit_pending(*db_, pending);
      last_commit = Steady::now();
    }
    // A task (flush, finish) must not pretend the tokens before it are safe when they are not.
    for (Task& task : tasks) {
      if (commit_error)
        task.fail(commit_error);
      else
        task.run(*db_);
    }
    lock.lock();
    if (stop) break;
  }
}

}  // namespace flashdesk::storage
