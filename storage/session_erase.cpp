// Deleting a session so that it is really gone: its rows, the image files and KV blocks nothing
// else uses, the WAL (truncated) and, when worthwhile, the free pages (VACUUM). Also the start-up
// removal of attachment files that no row names.
#include <system_error>
#include <unordered_set>

#include "storage/kv_block_file.h"
#include "storage/session_store.h"

namespace flashdesk::storage {

namespace fs = std::filesystem;

namespace {

// Blocks linked to this session and to no other one.
constexpr const char* kBlocksOnlyThisSessionUses =
    "SELECT key FROM session_kv_blocks WHERE session_id = ?1 AND key NOT IN "
    "(SELECT key FROM session_kv_blocks WHERE session_id <> ?1)";
constexpr const char* kDeleteBlockRow = "DELETE FROM kv_blocks WHERE key = ?1";
constexpr const char* kCountMessages = "SELECT COUNT(*) FROM messages WHERE session_id = ?1";
constexpr const char* kDeleteSession = "DELETE FROM sessions WHERE id = ?1";
constexpr const char* kUnreferencedAttachments =
    "SELECT digest, path FROM attachments WHERE digest NOT IN "
    "(SELECT digest FROM message_attachments)";
constexpr const char* kDeleteAttachmentRow = "DELETE FROM attachments WHERE digest = ?1";
constexpr const char* kAttachmentPaths = "SELECT path FROM attachments";
constexpr const char* kFreeBytes =
    "SELECT (SELECT freelist_count FROM pragma_freelist_count) * "
    "(SELECT page_size FROM pragma_page_size)";

std::vector<std::string> column_strings(Query& q) {
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

}  // namespace

EraseReport SessionStore::delete_session(int64_t id) {
  std::lock_guard lock(mutex_);
  require_session_locked(id);
  EraseReport report;
  std::vector<std::string> block_keys;
  std::vector<std::pair<std::string, fs::path>> attachments;  // (digest, file)
  {
    Transaction tx(db_);
    {
      Query q = db_.query(kBlocksOnlyThisSessionUses);
      block_keys = column_strings(q.with(id));
    }
    for (const std::string& key : block_keys) db_.query(kDeleteBlockRow).with(key).run();
    {
      Query q = db_.query(kCountMessages);
      q.with(id).step();
      report.messages = q.int64(0);
    }
    db_.query(kDeleteSession).with(id).run();  // cascades to messages, links, the token log
    {
      Query q = db_.query(kUnreferencedAttachments);
      while (q.step()) attachments.emplace_back(q.text(0), layout_.attachments_dir() / q.text(1));
    }
    for (const auto& [digest, file] : attachments)
      db_.query(kDeleteAttachmentRow).with(digest).run();
    tx.commit();
  }
  // Files after the commit: a crash in between leaves files without rows, which start-up removes.
  for (const auto& [digest, file] : attachments)
    report.attachments_removed += remove_file_if_present(file) ? 1 : 0;
  report.blocks_removed = erase_block_files(block_keys);
  compact_after_delete_locked(report);
  return report;
}

int64_t SessionStore::erase_block_files(std::span<const std::string> keys) {
  int64_t removed = 0;
  for (const std::string& hex : keys)
    if (auto key = BlockKey::from_hex(hex))
      removed += remove_file_if_present(block_file_path(layout_.kv_dir(), *key)) ? 1 : 0;
  return removed;
}

void SessionStore::compact_after_delete_locked(EraseReport& report) {
  // secure_delete already overwrote the freed pages; the WAL may still hold copies of them.
  db_.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  if (db_.scalar_int64(kFreeBytes) > options_.vacuum_threshold_bytes) {
    db_.exec("VACUUM");
    db_.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    report.vacuumed = true;
  }
}

int64_t SessionStore::remove_orphan_attachment_files_locked() {
  std::unordered_set<std::string> known;
  Query paths = db_.query(kAttachmentPaths);
  for (const std::string& rel : column_strings(paths))
    known.insert((layout_.attachments_dir() / rel).lexically_normal().string());
  int64_t removed = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(layout_.attachments_dir(), ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const fs::path path = it->path().lexically_normal();
    if (known.count(path.string()) == 0) removed += remove_file_if_present(path) ? 1 : 0;
  }
  return removed;
}

}  // namespace flashdesk::storage
