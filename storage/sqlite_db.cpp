// The SQLite connection wrapper: opening with our pragmas, statement cache, typed errors.
#include "storage/sqlite_db.h"

#include <sqlite3.h>

#include <cerrno>

#include "storage/file_util.h"

namespace flashdesk::storage {

namespace fs = std::filesystem;

// ---- Query ----

Query::~Query() {
  if (stmt_) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

namespace {
void check_bind(Database& db, int rc) {
  if (rc != SQLITE_OK) db.fail(rc, "bind");
}
}  // namespace

Query& Query::bind(int index, int64_t value) {
  check_bind(*db_, sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Query& Query::bind(int index, double value) {
  check_bind(*db_, sqlite3_bind_double(stmt_, index, value));
  return *this;
}

Query& Query::bind(int index, std::string_view value) {
  check_bind(*db_, sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                                       SQLITE_UTF8));
  return *this;
}

Query& Query::bind(int index, std::span<const uint8_t> blob) {
  // A zero-length blob must still be a blob, not NULL: sqlite3_bind_blob64 treats a null pointer as
  // NULL, so point at a static byte.
  static const uint8_t kEmpty = 0;
  const void* data = blob.empty() ? &kEmpty : blob.data();
  check_bind(*db_, sqlite3_bind_blob64(stmt_, index, data, blob.size(), SQLITE_TRANSIENT));
  return *this;
}

Query& Query::bind(int index, std::nullopt_t) {
  check_bind(*db_, sqlite3_bind_null(stmt_, index));
  return *this;
}

bool Query::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail(rc, sqlite3_sql(stmt_));
}

void Query::run() {
  while (step()) {
  }
}

bool Query::is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

int64_t Query::int64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}

double Query::real(int col) const {
  return sqlite3_column_double(stmt_, col);
}

std::string Query::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

std::vector<uint8_t> Query::blob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>();
}

// ---- Database ----

Database::Database(sqlite3* db, fs::path path) : db_(db), path_(std::move(path)) {}

Database::Database(Database&& other) noexcept
    : db_(other.db_), path_(std::move(other.path_)), statements_(std::move(other.statements_)) {
  other.db_ = nullptr;
  other.statements_.clear();
}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    close();
    db_ = other.db_;
    path_ = std::move(other.path_);
    statements_ = std::move(other.statements_);
    other.db_ = nullptr;
    other.statements_.clear();
  }
  return *this;
}

Database::~Database() {
  close();
}

void Database::close() noexcept {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  statements_.clear();
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

Database Database::open(const fs::path& path, const OpenOptions& options) {
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  if (options.read_only)
    flags |= SQLITE_OPEN_READONLY;
  else
    flags |= SQLITE_OPEN_READWRITE | (options.create ? SQLITE_OPEN_CREATE : 0);
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Database db(raw, path);  // owns the handle even when opening failed
  if (rc != SQLITE_OK) db.fail(rc, "open");
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);
  db.exec("PRAGMA foreign_keys = ON");
  if (!options.read_only) {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(options.durable_commits ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA secure_delete = ON");
  }
  return db;
}

Query Database::query(const char* sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) fail(rc, sql);
    it = statements_.emplace(sql, stmt).first;
  }
  return Query(*this, it->second);
}

void Database::exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) fail(rc, sql);
}

int64_t Database::scalar_int64(const char* sql) {
  Query q = query(sql);
  return q.step() ? q.int64(0) : 0;
}

int64_t Database::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

int Database::changes() const {
  return sqlite3_changes(db_);
}

void Database::fail(int code, std::string_view context) const {
  const int extended = db_ ? sqlite3_extended_errcode(db_) : code;
  std::string msg = path_.string() + ": " + std::string(context) + ": " +
                    (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(code)) + " (SQLite code " +
                    std::to_string(extended) + ")";
  // An I/O error whose cause was a full disk (e.g. growing the WAL index) is a full disk too.
  const int err = db_ ? sqlite3_system_errno(db_) : 0;
  const bool no_space = err == ENOSPC || err == EDQUOT || err == EFBIG;
  if ((code & 0xff) == SQLITE_FULL || ((code & 0xff) == SQLITE_IOERR && no_space))
    throw DiskFullError(msg);
  switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      throw FormatError(path_.string(), std::string(context) + ": " + sqlite3_errstr(code));
    default:
      throw DatabaseError(msg, code);
  }
}

// ---- Transaction ----

Transaction::Transaction(Database& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!open_) return;
  try {
    db_.exec("ROLLBACK");
  } catch (const Error&) {
    // The transaction may already have been rolled back by SQLite (e.g. after SQLITE_FULL).
  }
}

void Transaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace flashdesk::storage
