// Reading and folding the token write-ahead log.
#include "storage/answer_log.h"

#include "storage/sqlite_db.h"

namespace flashdesk::storage {

namespace {

constexpr const char* kAnswerForMessage = "SELECT id FROM answers WHERE message_id = ?1";
constexpr const char* kMessageOfAnswer = "SELECT message_id FROM answers WHERE id = ?1";
constexpr const char* kAnswerGroups =
    "SELECT token_ids, text, thinking FROM answer_tokens WHERE answer_id = ?1 ORDER BY first";
constexpr const char* kMessageContent =
    "SELECT token_ids, text, thinking FROM messages WHERE id = ?1";
constexpr const char* kUpdateMessageContent =
    "UPDATE messages SET token_ids = ?2, text = ?3, thinking = ?4, status = ?5, updated_ms = ?6, "
    "thinking_ms = ?7, stopped = ?8 WHERE id = ?1";
constexpr const char* kDeleteAnswer = "DELETE FROM answers WHERE id = ?1";
constexpr const char* kOpenAnswers = "SELECT id FROM answers ORDER BY id";

LoggedContent read_groups(Database& db, int64_t answer_id) {
  LoggedContent content;
  Query q = db.query(kAnswerGroups);
  q.with(answer_id);
  while (q.step()) {
    const auto ids = decode_token_ids(q.blob(0), db.path().string() + ": answer_tokens.token_ids");
    content.token_ids.insert(content.token_ids.end(), ids.begin(), ids.end());
    content.text += q.text(1);
    content.thinking += q.text(2);
  }
  return content;
}

}  // namespace

std::optional<LoggedContent> read_answer_log_for_message(Database& db, int64_t message_id) {
  int64_t answer_id;
  {
    Query q = db.query(kAnswerForMessage);
    q.with(message_id);
    if (!q.step()) return std::nullopt;
    answer_id = q.int64(0);
  }
  return read_groups(db, answer_id);
}

int64_t fold_answer(Database& db, int64_t answer_id, MessageStatus status, int64_t now_ms,
                    const AnswerEnd& end) {
  int64_t message_id;
  {
    Query q = db.query(kMessageOfAnswer);
    q.with(answer_id);
    if (!q.step()) return 0;  // already folded
    message_id = q.int64(0);
  }
  const LoggedContent logged = read_groups(db, answer_id);
  LoggedContent content;
  {
    Query q = db.query(kMessageContent);
    q.with(message_id);
    if (!q.step()) return 0;  // the message was deleted: the cascade removed the log too
    content.token_ids = decode_token_ids(q.blob(0), db.path().string() + ": messages.token_ids");
    content.text = q.text(1);
    content.thinking = q.text(2);
  }
  content.token_ids.insert(content.token_ids.end(), logged.token_ids.begin(),
                           logged.token_ids.end());
  content.text += logged.text;
  content.thinking += logged.thinking;
  db.query(kUpdateMessageContent)
      .with(message_id, encode_token_ids(content.token_ids), content.text, content.thinking,
            to_string(status), now_ms, end.thinking_ms, end.stopped ? 1 : 0)
      .run();
  db.query(kDeleteAnswer).with(answer_id).run();
  return static_cast<int64_t>(logged.token_ids.size());
}

std::vector<int64_t> open_answer_ids(Database& db) {
  std::vector<int64_t> ids;
  Query q = db.query(kOpenAnswers);
  while (q.step()) ids.push_back(q.int64(0));
  return ids;
}

}  // namespace flashdesk::storage
