// Cutting a session's conversation short: the messages from one ordinal on (regenerate).
#include "storage/session_store.h"

namespace flashdesk::storage {

namespace {

constexpr const char* kDeleteMessagesFrom =
    "DELETE FROM messages WHERE session_id = ?1 AND ordinal >= ?2";  // cascades to the token log
constexpr const char* kTouchSession = "UPDATE sessions SET updated_ms = ?2 WHERE id = ?1";

}  // namespace

int64_t SessionStore::delete_messages_from(int64_t session_id, int64_t from_ordinal) {
  std::lock_guard lock(mutex_);
  require_session_locked(session_id);
  Transaction tx(db_);
  db_.query(kDeleteMessagesFrom).with(session_id, from_ordinal).run();
  const int64_t removed = db_.scalar_int64("SELECT changes()");
  db_.query(kTouchSession).with(session_id, options_.clock()).run();
  tx.commit();
  return removed;
}

}  // namespace flashdesk::storage
