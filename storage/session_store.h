// The session store: chat sessions, their messages and image attachments in SQLite, with search,
// erasing deletion and start-up repair (answers cut short by a crash become `interrupted`
// messages; attachment files nothing refers to are removed).
//
// Goals: nothing the user wrote or saw is lost by a crash; delete really erases (rows, image files,
// the KV blocks only this session used; deleted rows are overwritten and the WAL truncated).
// Non-goals: the token log's writer thread (token_log.h) and block files (kv_block_store.h), which
// use their own connections to the same database. Thread-safe: calls are serialised.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "storage/session_types.h"
#include "storage/sqlite_db.h"
#include "storage/storage_layout.h"

namespace flashdesk::storage {

struct SessionStoreOptions {
  Clock clock = system_now_ms;
  // Fold crashed answers and remove orphaned attachment files on open. Only the owner of the data
  // folder (the holder of its InstanceLock) may repair, and only at start-up, before its own
  // TokenLog begins an answer: a live answer must not be folded under its writer.
  bool repair = false;
  // VACUUM after a delete when the free pages exceed this many bytes.
  int64_t vacuum_threshold_bytes = 4 << 20;
};

struct RepairReport {
  int64_t answers_recovered = 0;  // crashed answers folded into their (interrupted) messages
  int64_t tokens_recovered = 0;
  int64_t orphan_files_removed = 0;  // attachment files without a row, and temporary files
};

struct EraseReport {
  int64_t messages = 0;
  int64_t attachments_removed = 0;  // image files no other message refers to
  int64_t blocks_removed = 0;       // KV blocks no other session's prompt uses
  bool vacuumed = false;
};

class SessionStore {
 public:
  // Creates the folders and the database if missing, migrates it, repairs when asked.
  explicit SessionStore(StorageLayout layout, SessionStoreOptions options = {});

  const StorageLayout& layout() const { return layout_; }
  const RepairReport& repair_report() const { return repair_report_; }

  int64_t create_session(std::string_view title, const SessionSettings& settings);
  std::vector<SessionInfo> list_sessions();  // most recently updated first
  std::optional<SessionInfo> find_session(int64_t id);
  SessionInfo session(int64_t id);  // throws InvalidRequest when there is none
  void rename_session(int64_t id, std::string_view title);
  void update_settings(int64_t id, const SessionSettings& settings);
  // Sessions whose title, or any message's text or thinking, contains `text` (case-insensitive
  // for ASCII), most recently updated first.
  std::vector<SessionInfo> search(std::string_view text);
  EraseReport delete_session(int64_t id);

  // Everything of the session, image bytes included (read from their files).
  SessionExport export_session(int64_t id);
  // Creates a new session from an export, all or nothing. Returns its id.
  int64_t import_session(const SessionExport& session);

  // Appends at the next ordinal, storing each image once per digest. Returns the message id.
  int64_t append_message(int64_t session_id, const NewMessage& message);
  // In order, including tokens of an answer still being logged (or cut short by a crash).
  std::vector<Message> messages(int64_t session_id);
  std::optional<Attachment> find_attachment(const ImageDigest& digest);
  // Deletes the session's messages at `from_ordinal` and after (an answer being regenerated), with
  // their token log. Returns how many went. Images they alone used are removed at the next start.
  int64_t delete_messages_from(int64_t session_id, int64_t from_ordinal);
  // Sets how a finished answer ended (e.g. a stop that was the app closing, not the user).
  // InvalidRequest when there is no such message.
  void set_answer_end(int64_t message_id, const AnswerEnd& end);

 private:
  std::optional<SessionInfo> find_session_locked(int64_t id);
  void require_session_locked(int64_t id);
  Attachment store_image_file_locked(const NewImage& image);
  int64_t insert_message_locked(int64_t session_id, int64_t ordinal, const NewMessage& message,
                                std::span<const Attachment> stored, int64_t created_ms,
                                int64_t updated_ms);
  std::vector<Message> messages_locked(int64_t session_id);
  void load_attachments_locked(Message& message);
  void add_pending_log_locked(Message& message);
  void repair_locked();
  int64_t remove_orphan_attachment_files_locked();
  int64_t erase_block_files(std::span<const std::string> keys);
  void compact_after_delete_locked(EraseReport& report);

  StorageLayout layout_;
  SessionStoreOptions options_;
  std::mutex mutex_;
  Database db_;
  RepairReport repair_report_;
};

}  // namespace flashdesk::storage
