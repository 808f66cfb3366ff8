// Whole sessions in and out of the store (the JSON layer is session_json.h).
#include <bit>

#include "storage/session_store.h"

namespace flashdesk::storage {

namespace {

constexpr const char* kInsertImportedSession =
    "INSERT INTO sessions (title, created_ms, updated_ms, model_fingerprint, effort, thinking, "
    "system_prompt, temperature, top_p, seed, max_new_tokens) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

NewImage load_image(const Attachment& a) {
  return {read_whole_file(a.path), a.mime_type};
}

}  // namespace

SessionExport SessionStore::export_session(int64_t id) {
  std::lock_guard lock(mutex_);
  const auto info = find_session_locked(id);
  if (!info) throw InvalidRequest("no session with id " + std::to_string(id));
  SessionExport out{info->title, info->created_ms, info->updated_ms, info->settings, {}};
  for (Message& m : messages_locked(id)) {
    ExportedMessage e;
    e.message = {
        m.role, std::move(m.text), std::move(m.thinking), std::move(m.token_ids), m.status, {},
        m.end};
    for (const Attachment& a : m.attachments) e.message.images.push_back(load_image(a));
    e.created_ms = m.created_ms;
    e.updated_ms = m.updated_ms;
    out.messages.push_back(std::move(e));
  }
  return out;
}

int64_t SessionStore::import_session(const SessionExport& session) {
  session.settings.validate();
  std::lock_guard lock(mutex_);
  std::vector<std::vector<Attachment>> stored(session.messages.size());
  for (size_t i = 0; i < session.messages.size(); ++i)
    for (const NewImage& image : session.messages[i].message.images)
      stored[i].push_back(store_image_file_locked(image));

  const SessionSettings& s = session.settings;
  Transaction tx(db_);
  db_.query(kInsertImportedSession)
      .with(session.title, session.created_ms, session.updated_ms, s.model_fingerprint, s.effort,
            s.thinking ? 1 : 0, s.system_prompt, static_cast<double>(s.sampling.temperature),
            static_cast<double>(s.sampling.top_p), std::bit_cast<int64_t>(s.sampling.seed),
            s.max_new_tokens)
      .run();
  const int64_t id = db_.last_insert_rowid();
  for (size_t i = 0; i < session.messages.size(); ++i) {
    const ExportedMessage& m = session.messages[i];
    insert_message_locked(id, static_cast<int64_t>(i), m.message, stored[i], m.created_ms,
                          m.updated_ms);
  }
  tx.commit();
  return id;
}

}  // namespace flashdesk::storage
