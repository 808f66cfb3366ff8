// Sessions: open and repair, create, list, rename, settings, search.
#include "storage/session_store.h"

#include <bit>

#include "storage/answer_log.h"
#include "storage/schema.h"

namespace flashdesk::storage {

namespace {

#define FD_SESSION_COLUMNS                                                                 \
  "s.id, s.title, s.created_ms, s.updated_ms, s.model_fingerprint, s.effort, s.thinking, " \
  "s.system_prompt, s.temperature, s.top_p, s.seed, s.max_new_tokens, "                    \
  "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)"

constexpr const char* kInsertSession =
    "INSERT INTO sessions (title, created_ms, updated_ms, model_fingerprint, effort, thinking, "
    "system_prompt, temperature, top_p, seed, max_new_tokens) "
    "VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
constexpr const char* kListSessions =
    "SELECT " FD_SESSION_COLUMNS " FROM sessions s ORDER BY s.updated_ms DESC, s.id DESC";
constexpr const char* kFindSession =
    "SELECT " FD_SESSION_COLUMNS " FROM sessions s WHERE s.id = ?1";
constexpr const char* kSetAnswerEnd =
    "UPDATE messages SET thinking_ms = ?2, stopped = ?3 WHERE id = ?1 AND role = 'assistant'";
constexpr const char* kRenameSession =
    "UPDATE sessions SET title = ?2, updated_ms = ?3 WHERE id = ?1";
constexpr const char* kUpdateSettings =
    "UPDATE sessions SET model_fingerprint = ?2, effort = ?3, thinking = ?4, system_prompt = ?5, "
    "temperature = ?6, top_p = ?7, seed = ?8, max_new_tokens = ?9, updated_ms = ?10 WHERE id = ?1";
// `\` escapes LIKE's wildcards in the user's text (see like_pattern).
constexpr const char* kSearchSessions =
    "SELECT " FD_SESSION_COLUMNS
    " FROM sessions s "
    "WHERE s.title LIKE ?1 ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m "
    "  WHERE m.session_id = s.id AND (m.text LIKE ?1 ESCAPE '\\' OR m.thinking LIKE ?1 ESCAPE "
    "'\\')) "
    "ORDER BY s.updated_ms DESC, s.id DESC";

#undef FD_SESSION_COLUMNS

SessionInfo read_session(const Query& q) {
  SessionInfo s;
  s.id = q.int64(0);
  s.title = q.text(1);
  s.created_ms = q.int64(2);
  s.updated_ms = q.int64(3);
  s.settings.model_fingerprint = q.text(4);
  s.settings.effort = static_cast<int>(q.int64(5));
  s.settings.thinking = q.int64(6) != 0;
  s.settings.system_prompt = q.text(7);
  s.settings.sampling.temperature = static_cast<float>(q.real(8));
  s.settings.sampling.top_p = static_cast<float>(q.real(9));
  s.settings.sampling.seed = std::bit_cast<uint64_t>(q.int64(10));
  s.settings.max_new_tokens = q.int64(11);
  s.message_count = q.int64(12);
  return s;
}

std::vector<SessionInfo> read_sessions(Query& q) {
  std::vector<SessionInfo> out;
  while (q.step()) out.push_back(read_session(q));
  return out;
}

// "%text%" with LIKE's wildcards and the escape character escaped.
std::string like_pattern(std::string_view text) {
  std::string p = "%";
  for (char c : text) {
    if (c == '%' || c == '_' || c == '\\') p += '\\';
    p += c;
  }
  return p + "%";
}

Database open_and_migrate(const StorageLayout& layout) {
  layout.create_directories();
  Database db = Database::open(layout.database());
  migrate(db);
  return db;
}

}  // namespace

SessionStore::SessionStore(StorageLayout layout, SessionStoreOptions options)
    : layout_(std::move(layout)), options_(std::move(options)), db_(open_and_migrate(layout_)) {
  if (options_.repair) repair_locked();
}

void SessionStore::repair_locked() {
  {
    Transaction tx(db_);
    for (int64_t answer : open_answer_ids(db_)) {
      repair_report_.tokens_recovered +=
          fold_answer(db_, answer, MessageStatus::interrupted, options_.clock());
      ++repair_report_.answers_recovered;
    }
    tx.commit();
  }
  repair_report_.orphan_files_removed = remove_orphan_attachment_files_locked();
}

int64_t SessionStore::create_session(std::string_view title, const SessionSettings& settings) {
  settings.validate();
  std::lock_guard lock(mutex_);
  const SamplingParams& sp = settings.sampling;
  db_.query(kInsertSession)
      .with(title, options_.clock(), settings.model_fingerprint, settings.effort,
            settings.thinking ? 1 : 0, settings.system_prompt, static_cast<double>(sp.temperature),
            static_cast<double>(sp.top_p), std::bit_cast<int64_t>(sp.seed), settings.max_new_tokens)
      .run();
  return db_.last_insert_rowid();
}

std::vector<SessionInfo> SessionStore::list_sessions() {
  std::lock_guard lock(mutex_);
  Query q = db_.query(kListSessions);
  return read_sessions(q);
}

std::optional<SessionInfo> SessionStore::find_session_locked(int64_t id) {
  Query q = db_.query(kFindSession);
  q.with(id);
  if (!q.step()) return std::nullopt;
  return read_session(q);
}

void SessionStore::require_session_locked(int64_t id) {
  if (!find_session_locked(id)) throw InvalidRequest("no session with id " + std::to_string(id));
}

std::optional<SessionInfo> SessionStore::find_session(int64_t id) {
  std::lock_guard lock(mutex_);
  return find_session_locked(id);
}

SessionInfo SessionStore::session(int64_t id) {
  std::lock_guard lock(mutex_);
  auto s = find_session_locked(id);
  if (!s) throw InvalidRequest("no session with id " + std::to_string(id));
  return *s;
}

void SessionStore::rename_session(int64_t id, std::string_view title) {
  std::lock_guard lock(mutex_);
  db_.query(kRenameSession).with(id, title, options_.clock()).run();
  if (db_.changes() == 0) throw InvalidRequest("no session with id " + std::to_string(id));
}

void SessionStore::set_answer_end(int64_t message_id, const AnswerEnd& end) {
  std::lock_guard lock(mutex_);
  db_.query(kSetAnswerEnd).with(message_id, end.thinking_ms, end.stopped ? 1 : 0).run();
  if (db_.changes() == 0) throw InvalidRequest("no answer with id " + std::to_string(message_id));
}

void SessionStore::update_settings(int64_t id, const SessionSettings& settings) {
  settings.validate();
  std::lock_guard lock(mutex_);
  const SamplingParams& sp = settings.sampling;
  db_.query(kUpdateSettings)
      .with(id, settings.model_fingerprint, settings.effort, settings.thinking ? 1 : 0,
            settings.system_prompt, static_cast<double>(sp.temperature),
            static_cast<double>(sp.top_p), std::bit_cast<int64_t>(sp.seed), settings.max_new_tokens,
            options_.clock())
      .run();
  if (db_.changes() == 0) throw InvalidRequest("no session with id " + std::to_string(id));
}

std::vector<SessionInfo> SessionStore::search(std::string_view text) {
  std::lock_guard lock(mutex_);
  Query q = db_.query(kSearchSessions);
  q.with(like_pattern(text));
  return read_sessions(q);
}

}  // namespace flashdesk::storage
