// KvBlockStore's background writer: a bounded queue, one block file at a time (temporary name,
// fsync, rename), then its index row; failures are reported to the caller and the store goes on.
#include <system_error>

#include "storage/file_util.h"
#include "storage/kv_block_file.h"
#include "storage/kv_block_index.h"
#include "storage/kv_block_store.h"
#include "storage/sqlite_db.h"

namespace flashdesk::storage {

namespace {

std::future<WriteOutcome> ready(WriteStatus status, std::string message) {
  std::promise<WriteOutcome> p;
  p.set_value({status, std::move(message)});
  return p.get_future();
}

}  // namespace

KvBlockStore::~KvBlockStore() {
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_wake_.notify_all();
  writer_.join();
}

std::future<WriteOutcome> KvBlockStore::put(BlockWrite block) {
  if (block.token_count != options_.tokens_per_block)
    throw InvalidRequest("a KV block holds " + std::to_string(options_.tokens_per_block) +
                         " tokens, got " + std::to_string(block.token_count));
  if (block.payload.empty()) throw InvalidRequest("a KV block needs a payload");
  if (block.model_fingerprint.empty() || block.model_fingerprint.size() > kMaxFingerprintBytes)
    throw InvalidRequest("a model fingerprint has 1 to 128 bytes, got " +
                         std::to_string(block.model_fingerprint.size()));
  std::unique_lock lock(queue_mutex_);
  if (queued_keys_.count(block.key)) return ready(WriteStatus::already_stored, "already queued");
  if (queued_bytes_ + block.payload.size() > options_.max_queued_bytes) {
    ++writes_failed_;
    return ready(WriteStatus::dropped, "KV spill queue full: the disk is slower than generation");
  }
  queued_bytes_ += block.payload.size();
  queued_keys_.insert(block.key);
  queue_.push_back({std::move(block), {}});
  std::future<WriteOutcome> result = queue_.back().done.get_future();
  lock.unlock();
  queue_wake_.notify_all();
  return result;
}

void KvBlockStore::flush() {
  std::unique_lock lock(queue_mutex_);
  queue_idle_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

void KvBlockStore::run_writer() {
  std::unique_lock lock(queue_mutex_);
  for (;;) {
    queue_wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    Queued item = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    WriteOutcome outcome;
    try {
      outcome = write_one(*writer_db_, item.block);
    } catch (const std::exception& e) {  // the index could not be read: report, keep serving
      outcome = {WriteStatus::failed, std::string("KV block not saved: ") + e.what()};
    }
    if (outcome.status == WriteStatus::written || outcome.status == WriteStatus::already_stored) {
      ++writes_ok_;
    } else {
      ++writes_failed_;
      std::lock_guard error_lock(error_mutex_);
      last_write_error_ = outcome.message;
    }
    lock.lock();
    queued_bytes_ -= item.block.payload.size();
    queued_keys_.erase(item.block.key);  // before the caller hears: it may put the key again
    writing_ = false;
    if (queue_.empty()) queue_idle_.notify_all();
    lock.unlock();
    item.done.set_value(outcome);
    lock.lock();
  }
}

WriteOutcome KvBlockStore::write_one(Database& db, BlockWrite& block) {
  const int64_t now = options_.clock();
  if (block_index::contains(db, block.key)) {
    block_index::touch(db, block.key, now);
    if (block.session_id) block_index::link_session(db, *block.session_id, block.key);
    return {WriteStatus::already_stored, {}};
  }
  const std::filesystem::path path = block_file_path(layout_.kv_dir(), block.key);
  BlockRow row{block.key,
               block.parent,
               block.model_fingerprint,
               block.token_count,
               static_cast<int64_t>(kBlockHeaderSize + block.payload.size()),
               xxh3_64(block.payload),
               now,
               now};
  try {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec)
      throw IoError("cannot create folder " + path.parent_path().string() + ": " + ec.message());
    const std::vector<uint8_t> header =
        encode_block_header({row.key, row.parent, static_cast<uint32_t>(row.token_count),
                             row.model_fingerprint, block.payload.size(), row.checksum});
    const std::span<const uint8_t> parts[] = {header, block.payload};
    write_file_atomic(path, parts);
    Transaction tx(db);
    block_index::insert(db, row);
    if (block.session_id && !block_index::link_session(db, *block.session_id, block.key)) {
      remove_file_if_present(path);  // the session was deleted while the block waited
      return {WriteStatus::dropped, "the session was deleted"};
    }
    tx.commit();
  } catch (const DiskFullError& e) {
    remove_file_if_present(path);  // the index row, if any, was rolled back
    return {WriteStatus::disk_full, std::string("disk full, KV block not saved: ") + e.what()};
  } catch (const Error& e) {
    remove_file_if_present(path);
    return {WriteStatus::failed, std::string("KV block not saved: ") + e.what()};
  }
  evict_with(db);
  return {WriteStatus::written, {}};
}

}  // namespace flashdesk::storage
