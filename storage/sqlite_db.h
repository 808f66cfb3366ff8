// A small RAII layer over the SQLite C API: a connection, cached prepared statements that reset
// themselves when a query is done, and transactions that roll back unless committed.
//
// Goals: bound parameters only (no SQL is ever built from data), one connection per thread, errors
// as typed exceptions naming the database file. Non-goals: an ORM, sharing a connection between
// threads (each owner serialises its own).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/util/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace flashdesk::storage {

// SQLite failed for a reason other than a full disk or a damaged file.
class DatabaseError : public IoError {
 public:
  DatabaseError(const std::string& msg, int code) : IoError(msg), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

class Database;

// A prepared statement borrowed from a Database's cache; resets (and clears bindings) when the
// borrow ends, so no read transaction outlives the query.
class Query {
 public:
  Query(Database& db, sqlite3_stmt* stmt) : db_(&db), stmt_(stmt) {}
  Query(Query&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  Query& operator=(Query&&) = delete;
  ~Query();

  // Parameters are numbered from 1, as in SQL's ?1, ?2...
  Query& bind(int index, int64_t value);
  Query& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Query& bind(int index, double value);
  Query& bind(int index, std::string_view value);
  Query& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Query& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
  Query& bind(int index, std::span<const uint8_t> blob);
  Query& bind(int index, std::nullopt_t);
  template <class T>
  Query& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind(index, std::nullopt);
  }
  // Binds the arguments to ?1, ?2, ... in order.
  template <class... Args>
  Query& with(const Args&... args) {
    int index = 0;
    (bind(++index, args), ...);
    return *this;
  }

  bool step();  // true while a row is ready
  void run();   // executes a statement that returns no rows

  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::vector<uint8_t> blob(int col) const;

 private:
  Database* db_;
  sqlite3_stmt* stmt_;
};

struct OpenOptions {
  bool create = true;      // create the file if missing
  bool read_only = false;  // no writes, no journal-mode change
  int busy_timeout_ms = 10000;
  // synchronous=FULL: a commit survives a power cut. NORMAL (in WAL mode): it survives a crash of
  // the process and the database stays consistent, but the last commits may be lost to a power
  // cut; for bookkeeping that costs nothing to lose (LRU times), it saves an fsync per commit.
  bool durable_commits = true;
};

class Database {
 public:
  // Opens with foreign keys on, WAL journal, synchronous=FULL unless asked otherwise, and
  // secure_delete (deleted rows are overwritten, not left in free pages).
  static Database open(const std::filesystem::path& path, const OpenOptions& options = {});

  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  ~Database();

  // `sql` must be a constant with static storage: the prepared statement is cached by its address.
  Query query(const char* sql);
  // Runs SQL without parameters (schema changes, pragmas); may hold several statements.
  void exec(const char* sql);
  int64_t scalar_int64(const char* sql);  // first column of the first row of a parameterless query

  int64_t last_insert_rowid() const;
  int changes() const;
  const std::filesystem::path& path() const { return path_; }
  sqlite3* handle() const { return db_; }

  // Throws the typed error for an SQLite result code (DiskFullError, FormatError, DatabaseError).
  [[noreturn]] void fail(int code, std::string_view context) const;

 private:
  Database(sqlite3* db, std::filesystem::path path);
  void close() noexcept;

  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
  std::unordered_map<const char*, sqlite3_stmt*> statements_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted (an exception passed by).
class Transaction {
 public:
  explicit Transaction(Database& db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Database& db_;
  bool open_ = true;
};

}  // namespace flashdesk::storage
