// KvBlockStore's background writer: a bounded queue, one block file at a time (temporary name,
// fsync, rename), then its index row; failures are reported to the caller and the store goes on.
#include <functional>
#include <map>
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
    std::vector<Queued> batch;
    while (!queue_.empty() && batch.size() < kMaxWriteBatch) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    writing_ = true;
    lock.unlock();
    std::vector<WriteOutcome> outcomes;
    try {
      outcomes = write_batch(*writer_db_, batch);
    } catch (const std::exception& e) {  // the index could not be read: report, keep serving
      outcomes.assign(batch.size(),
                      {WriteStatus::failed, std::string("KV block not saved: ") + e.what()});
    }
    for (const WriteOutcome& outcome : outcomes) {
      if (outcome.status == WriteStatus::written || outcome.status == WriteStatus::already_stored) {
        ++writes_ok_;
      } else {
        ++writes_failed_;
        std::lock_guard error_lock(error_mutex_);
        last_write_error_ = outcome.message;
      }
    }
    lock.lock();
    for (const Queued& item : batch) {
      queued_bytes_ -= item.block.payload.size();
      queued_keys_.erase(item.block.key);  // before the caller hears: it may put the key again
    }
    writing_ = false;
    if (queue_.empty()) queue_idle_.notify_all();
    lock.unlock();
    for (size_t i = 0; i < batch.size(); ++i) batch[i].done.set_value(outcomes[i]);
    lock.lock();
  }
}

namespace {

WriteOutcome failure(const Error& e) {
  if (dynamic_cast<const DiskFullError*>(&e))
    return {WriteStatus::disk_full, std::string("disk full, KV block not saved: ") + e.what()};
  return {WriteStatus::failed, std::string("KV block not saved: ") + e.what()};
}

}  // namespace

// Files first (each synced and renamed), then one fsync per folder, then one transaction for all
// the index rows: a crash leaves at worst files without rows, which start-up removes.
std::vector<WriteOutcome> KvBlockStore::write_batch(Database& db, std::vector<Queued>& batch) {
  const int64_t now = options_.clock();
  std::vector<WriteOutcome> outcomes(batch.size());
  std::vector<std::optional<BlockRow>> rows(batch.size());  // set for the files written
  // Several files at once: their syncs overlap on the device instead of queueing one by one.
  std::vector<std::function<void()>> jobs;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (block_index::contains(db, batch[i].block.key)) {
      outcomes[i] = {WriteStatus::already_stored, {}};
      continue;
    }
    jobs.push_back([&, i] {
      try {
        rows[i] = write_block_file(batch[i].block,
                                   block_file_path(layout_.kv_dir(), batch[i].block.key), now);
      } catch (const Error& e) {
        outcomes[i] = failure(e);
      }
    });
  }
  io_pool_.run_all(std::move(jobs));
  std::map<std::filesystem::path, std::vector<size_t>> by_folder;
  for (size_t i = 0; i < batch.size(); ++i)
    if (rows[i])
      by_folder[block_file_path(layout_.kv_dir(), batch[i].block.key).parent_path()].push_back(i);
  for (const auto& [folder, items] : by_folder) {
    try {
      fsync_directory(folder);
    } catch (const Error& e) {
      for (size_t i : items) {
        remove_file_if_present(block_file_path(layout_.kv_dir(), batch[i].block.key));
        rows[i].reset();
        outcomes[i] = failure(e);
      }
    }
  }
  index_batch(db, batch, rows, outcomes, now);
  evict_with(db);
  return outcomes;
}

BlockRow KvBlockStore::write_block_file(const BlockWrite& block, const std::filesystem::path& path,
                                        int64_t now) {
  BlockRow row{block.key,
               block.parent,
               block.model_fingerprint,
               block.token_count,
               static_cast<int64_t>(kBlockHeaderSize + block.payload.size()),
               xxh3_64(block.payload),
               now,
               now};
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    throw IoError("cannot create folder " + path.parent_path().string() + ": " + ec.message());
  const std::vector<uint8_t> header =
      encode_block_header({row.key, row.parent, static_cast<uint32_t>(row.token_count),
                           row.model_fingerprint, block.payload.size(), row.checksum});
  const std::span<const uint8_t> parts[] = {header, block.payload};
  write_file_atomic(path, parts, /*sync_folder=*/false);
  return row;
}

// One transaction: rows of the files written, LRU and session links of blocks already stored.
// A block whose session was deleted meanwhile is dropped; if the transaction fails, so do all the
// files it would have indexed.
void KvBlockStore::index_batch(Database& db, std::vector<Queued>& batch,
                               std::vector<std::optional<BlockRow>>& rows,
                               std::vector<WriteOutcome>& outcomes, int64_t now) {
  std::vector<size_t> dropped;
  try {
    Transaction tx(db);
    for (size_t i = 0; i < batch.size(); ++i) {
      const BlockWrite& block = batch[i].block;
      if (outcomes[i].status == WriteStatus::already_stored) {
        block_index::touch(db, block.key, now);
        if (block.session_id) block_index::link_session(db, *block.session_id, block.key);
        continue;
      }
      if (!rows[i]) continue;
      block_index::insert(db, *rows[i]);
      if (block.session_id && !block_index::link_session(db, *block.session_id, block.key)) {
        block_index::erase(db, block.key);
        dropped.push_back(i);
      }
    }
    tx.commit();
  } catch (const Error& e) {
    for (size_t i = 0; i < batch.size(); ++i)
      if (rows[i]) {
        remove_file_if_present(block_file_path(layout_.kv_dir(), batch[i].block.key));
        rows[i].reset();
        outcomes[i] = failure(e);
      }
    return;
  }
  for (size_t i : dropped) {
    remove_file_if_present(block_file_path(layout_.kv_dir(), batch[i].block.key));
    outcomes[i] = {WriteStatus::dropped, "the session was deleted"};
  }
}

}  // namespace flashdesk::storage
