// Messages and their image attachments: append (image files stored once per digest) and read.

#include <system_error>

#include "storage/answer_log.h"
#include "storage/session_store.h"

namespace flashdesk::storage {

namespace fs = std::filesystem;

namespace {

constexpr const char* kNextOrdinal =
    "SELECT COALESCE(MAX(ordinal), -1) + 1 FROM messages WHERE session_id = ?1";
constexpr const char* kInsertMessage =
    "INSERT INTO messages (session_id, ordinal, role, text, thinking, token_ids, status, "
    "created_ms, updated_ms, thinking_ms, stopped) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
constexpr const char* kTouchSession = "UPDATE sessions SET updated_ms = ?2 WHERE id = ?1";
constexpr const char* kInsertAttachment =
    "INSERT OR IGNORE INTO attachments (digest, path, mime_type, byte_size, created_ms) "
    "VALUES (?1, ?2, ?3, ?4, ?5)";
constexpr const char* kLinkAttachment =
    "INSERT INTO message_attachments (message_id, position, digest) VALUES (?1, ?2, ?3)";
constexpr const char* kSelectMessages =
    "SELECT id, ordinal, role, text, thinking, token_ids, status, created_ms, updated_ms, "
    "thinking_ms, stopped FROM messages WHERE session_id = ?1 ORDER BY ordinal";
constexpr const char* kSelectMessageAttachments =
    "SELECT a.digest, a.mime_type, a.byte_size, a.path FROM message_attachments ma "
    "JOIN attachments a ON a.digest = ma.digest WHERE ma.message_id = ?1 ORDER BY ma.position";
constexpr const char* kSelectAttachment =
    "SELECT digest, mime_type, byte_size, path FROM attachments WHERE digest = ?1";

// Attachment files live at <attachments>/<first two hex digits>/<digest>; the row keeps the part
// below the attachments folder so the data folder can move.
fs::path relative_attachment_path(const ImageDigest& digest) {
  const std::string hex = digest.hex();
  return fs::path(hex.substr(0, 2)) / hex;
}

bool file_has_size(const fs::path& path, uint64_t size) {
  std::error_code ec;
  return fs::file_size(path, ec) == size && !ec;
}

}  // namespace

Attachment SessionStore::store_image_file_locked(const NewImage& image) {
  if (image.bytes.empty()) throw InvalidRequest("an attached image has no bytes");
  if (image.mime_type.empty()) throw InvalidRequest("an attached image has no MIME type");
  Attachment a;
  a.digest = image_digest(image.bytes);
  a.mime_type = image.mime_type;
  a.byte_size = static_cast<int64_t>(image.bytes.size());
  a.path = layout_.attachments_dir() / relative_attachment_path(a.digest);
  if (!file_has_size(a.path, image.bytes.size())) {
    std::error_code ec;
    fs::create_directories(a.path.parent_path(), ec);
    if (ec) throw IoError("cannot create folder " + a.path.parent_path().string());
    const std::span<const uint8_t> parts[] = {image.bytes};
    write_file_atomic(a.path, parts);
  }
  return a;
}

int64_t SessionStore::insert_message_locked(int64_t session_id, int64_t ordinal,
                                            const NewMessage& message,
                                            std::span<const Attachment> stored, int64_t created_ms,
                                            int64_t updated_ms) {
  db_.query(kInsertMessage)
      .with(session_id, ordinal, to_string(message.role), message.text, message.thinking,
            encode_token_ids(message.token_ids), to_string(message.status), created_ms, updated_ms,
            message.end.thinking_ms, message.end.stopped ? 1 : 0)
      .run();
  const int64_t message_id = db_.last_insert_rowid();
  for (size_t i = 0; i < stored.size(); ++i) {
    const Attachment& a = stored[i];
    db_.query(kInsertAttachment)
        .with(a.digest.hex(), relative_attachment_path(a.digest).string(), a.mime_type, a.byte_size,
              created_ms)
        .run();
    db_.query(kLinkAttachment).with(message_id, static_cast<int64_t>(i), a.digest.hex()).run();
  }
  return message_id;
}

int64_t SessionStore::append_message(int64_t session_id, const NewMessage& message) {
  std::lock_guard lock(mutex_);
  require_session_locked(session_id);
  // Files first: a crash before the commit leaves a file without a row, which repair removes.
  std::vector<Attachment> stored;
  for (const NewImage& image : message.images) stored.push_back(store_image_file_locked(image));

  const int64_t now = options_.clock();
  Transaction tx(db_);
  Query next = db_.query(kNextOrdinal);
  next.with(session_id).step();
  const int64_t message_id =
      insert_message_locked(session_id, next.int64(0), message, stored, now, now);
  db_.query(kTouchSession).with(session_id, now).run();
  tx.commit();
  return message_id;
}

void SessionStore::load_attachments_locked(Message& message) {
  Query q = db_.query(kSelectMessageAttachments);
  q.with(message.id);
  while (q.step()) {
    Attachment a;
    a.digest = ImageDigest::from_hex(q.text(0)).value_or(ImageDigest{});
    a.mime_type = q.text(1);
    a.byte_size = q.int64(2);
    a.path = layout_.attachments_dir() / q.text(3);
    message.attachments.push_back(std::move(a));
  }
}

void SessionStore::add_pending_log_locked(Message& message) {
  const auto logged = read_answer_log_for_message(db_, message.id);
  if (!logged) return;
  message.token_ids.insert(message.token_ids.end(), logged->token_ids.begin(),
                           logged->token_ids.end());
  message.text += logged->text;
  message.thinking += logged->thinking;
}

std::vector<Message> SessionStore::messages(int64_t session_id) {
  std::lock_guard lock(mutex_);
  return messages_locked(session_id);
}

std::vector<Message> SessionStore::messages_locked(int64_t session_id) {
  require_session_locked(session_id);
  std::vector<Message> out;
  {
    Query q = db_.query(kSelectMessages);
    q.with(session_id);
    while (q.step()) {
      Message m;
      m.id = q.int64(0);
      m.session_id = session_id;
      m.ordinal = q.int64(1);
      m.role = parse_role(q.text(2)).value_or(Role::user);  // the CHECK constraint allows no other
      m.text = q.text(3);
      m.thinking = q.text(4);
      m.token_ids = decode_token_ids(q.blob(5), db_.path().string() + ": messages.token_ids");
      m.status = parse_status(q.text(6)).value_or(MessageStatus::interrupted);
      m.created_ms = q.int64(7);
      m.updated_ms = q.int64(8);
      m.end.thinking_ms = q.int64(9);
      m.end.stopped = q.int64(10) != 0;
      out.push_back(std::move(m));
    }
  }
  for (Message& m : out) {
    load_attachments_locked(m);
    add_pending_log_locked(m);
  }
  return out;
}

std::optional<Attachment> SessionStore::find_attachment(const ImageDigest& digest) {
  std::lock_guard lock(mutex_);
  Query q = db_.query(kSelectAttachment);
  q.with(digest.hex());
  if (!q.step()) return std::nullopt;
  return Attachment{digest, q.text(1), q.int64(2), layout_.attachments_dir() / q.text(3)};
}

}  // namespace flashdesk::storage
