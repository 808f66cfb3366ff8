// KvBlockStore: opening, the prefix walk, verified parallel reads, statistics.
#include "storage/kv_block_store.h"

#include <cerrno>
#include <cstring>
#include <functional>

#include "storage/file_util.h"
#include "storage/kv_block_file.h"
#include "storage/kv_block_index.h"
#include "storage/schema.h"
#include "storage/sqlite_db.h"

namespace flashdesk::storage {

std::string_view to_string(WriteStatus status) {
  switch (status) {
    case WriteStatus::written:
      return "written";
    case WriteStatus::already_stored:
      return "already stored";
    case WriteStatus::disk_full:
      return "disk full";
    case WriteStatus::failed:
      return "failed";
    case WriteStatus::dropped:
      return "dropped";
  }
  return "?";
}

std::string_view to_string(ReadStatus status) {
  switch (status) {
    case ReadStatus::hit:
      return "hit";
    case ReadStatus::not_stored:
      return "not stored";
    case ReadStatus::corrupt:
      return "corrupt";
    case ReadStatus::io_error:
      return "I/O error";
  }
  return "?";
}

std::span<const uint8_t> BlockRead::payload() const {
  if (status != ReadStatus::hit) return {};
  return file.subspan(kBlockHeaderSize);
}

namespace {

std::unique_ptr<Database> open_index(const StorageLayout& layout, bool durable_commits) {
  auto db = std::make_unique<Database>(
      Database::open(layout.database(), {.create = false, .durable_commits = durable_commits}));
  if (const int64_t v = schema_version(*db); v != kSchemaVersion)
    throw FormatError(layout.database().string(), "schema version " + std::to_string(v) +
                                                      " is not " + std::to_string(kSchemaVersion) +
                                                      ": open it with SessionStore first");
  return db;
}

}  // namespace

KvBlockStore::KvBlockStore(StorageLayout layout, KvBlockStoreOptions options)
    : layout_(std::move(layout)), options_(std::move(options)) {
  if (options_.tokens_per_block <= 0)
    throw InvalidRequest("tokens_per_block must be positive, got " +
                         std::to_string(options_.tokens_per_block));
  layout_.create_directories();
  reader_ = make_block_reader(options_.reader);
  // Readers' commits are LRU times and session links: losing the last few to a power cut is
  // harmless, so they skip the fsync. A new block's row is durable.
  db_ = open_index(layout_, false);
  writer_db_ = open_index(layout_, true);
  if (options_.repair) reconcile_report_ = reconcile(*writer_db_);
  writer_ = std::thread([this] { run_writer(); });
}

PrefixMatch KvBlockStore::match_prefix(std::string_view model_fingerprint,
                                       std::span<const TokenId> prompt,
                                       std::span<const ImageSpan> images) {
  PrefixMatch match;
  match.all_keys = chain_block_keys(model_fingerprint, prompt, images, options_.tokens_per_block);
  std::lock_guard lock(db_mutex_);
  for (const BlockKey& key : match.all_keys) {
    if (!block_index::contains(*db_, key)) break;
    match.covered_keys.push_back(key);
  }
  match.covered_tokens =
      static_cast<int64_t>(match.covered_keys.size()) * options_.tokens_per_block;
  return match;
}

BlockRead KvBlockStore::verify(const BlockKey& key, const BlockRow& row, const ReadResult& read) {
  BlockRead out;
  out.key = key;
  const std::string file = block_file_path(layout_.kv_dir(), key).string();
  if (read.error == ENOENT) {
    out.status = ReadStatus::not_stored;
    out.message = file + ": the file is gone";
    return out;
  }
  if (read.error != 0) {
    out.status = ReadStatus::io_error;
    out.message = file + ": " + std::strerror(read.error);
    return out;
  }
  try {
    const BlockHeader h = verify_block_file(read.bytes(), key, row.model_fingerprint, file);
    if (static_cast<int64_t>(h.token_count) != row.token_count ||
        h.payload_checksum != row.checksum)
      throw FormatError(file, "header disagrees with the index (token count or checksum)");
  } catch (const FormatError& e) {
    out.status = ReadStatus::corrupt;
    out.message = e.what();
    return out;
  }
  out.status = ReadStatus::hit;
  out.file = read.bytes();
  return out;
}

std::vector<BlockRead> KvBlockStore::get(std::span<const BlockKey> keys,
                                         std::optional<int64_t> session_id) {
  std::vector<std::optional<BlockRow>> rows(keys.size());
  {
    std::lock_guard lock(db_mutex_);
    for (size_t i = 0; i < keys.size(); ++i) rows[i] = block_index::find(*db_, keys[i]);
  }
  std::vector<ReadRequest> requests;
  std::vector<size_t> request_of;  // index into keys
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!rows[i]) continue;
    requests.push_back(
        {block_file_path(layout_.kv_dir(), keys[i]), static_cast<uint64_t>(rows[i]->file_size)});
    request_of.push_back(i);
  }
  const ReadBatch batch = reader_->read_all(requests);

  std::vector<BlockRead> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i].key = keys[i];
    out[i].status = ReadStatus::not_stored;
  }
  // Checksums in parallel: on a slow machine XXH3 over a restored session is tens of ms.
  std::vector<std::function<void()>> jobs;
  for (size_t r = 0; r < requests.size(); ++r)
    jobs.push_back([&, r] {
      const size_t i = request_of[r];
      out[i] = verify(keys[i], *rows[i], batch.results[r]);
      if (out[i].status == ReadStatus::hit) out[i].memory = batch.arena;
    });
  io_pool_.run_all(std::move(jobs));
  const int64_t now = options_.clock();
  std::lock_guard lock(db_mutex_);
  Transaction tx(*db_);
  for (size_t i = 0; i < out.size(); ++i) {
    BlockRead& read = out[i];
    if (read.status == ReadStatus::hit) {
      ++reads_hit_;
      block_index::touch(*db_, read.key, now);
      if (session_id) block_index::link_session(*db_, *session_id, read.key);
      continue;
    }
    ++reads_missed_;
    if (!rows[i]) continue;  // never stored (or not yet: a writer may be renaming its file now)
    if (read.status == ReadStatus::corrupt) ++reads_corrupt_;
    // A damaged block is never offered again; a vanished file leaves a row to drop. Only the row
    // that was read goes: the block may have been evicted and written anew meanwhile.
    if (read.status == ReadStatus::corrupt || read.status == ReadStatus::not_stored) {
      if (block_index::erase_if_created(*db_, read.key, rows[i]->created_ms) &&
          read.status == ReadStatus::corrupt)
        remove_file_if_present(block_file_path(layout_.kv_dir(), read.key));
    }
  }
  tx.commit();
  return out;
}

void KvBlockStore::link_session(int64_t session_id, std::span<const BlockKey> keys) {
  std::lock_guard lock(db_mutex_);
  Transaction tx(*db_);
  for (const BlockKey& key : keys) block_index::link_session(*db_, session_id, key);
  tx.commit();
}

EvictionReport KvBlockStore::evict() {
  std::lock_guard lock(db_mutex_);
  return evict_with(*db_);
}

KvStoreStats KvBlockStore::stats() {
  KvStoreStats s;
  {
    std::lock_guard lock(db_mutex_);
    s.blocks = block_index::count(*db_);
    s.bytes = block_index::total_bytes(*db_);
  }
  s.writes_ok = writes_ok_;
  s.writes_failed = writes_failed_;
  s.reads_hit = reads_hit_;
  s.reads_missed = reads_missed_;
  s.reads_corrupt = reads_corrupt_;
  std::lock_guard lock(error_mutex_);
  s.last_write_error = last_write_error_;
  return s;
}

}  // namespace flashdesk::storage
