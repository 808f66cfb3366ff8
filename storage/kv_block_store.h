// The SSD KV block store: the global KV of the KV-source layers, in blocks of a fixed number of
// tokens, as content-addressed files (kv_block_file.h) indexed in SQLite (kv_block_index.h).
//
// Goals: equal prompt prefixes share blocks across sessions and processes; a changed model never
// reuses stale KV (the fingerprint is in every key); a damaged block is detected on every read,
// deleted and reported as a miss, never used; writes happen in the background and a full disk is
// reported, not fatal; reads are parallel and large; LRU eviction under a disk budget and a
// retention time; files and index reconciled at start-up.
// Non-goals: what the payload means (the engine serialises it), the window KV (window_pool.h).
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "storage/block_reader.h"
#include "storage/kv_block_index.h"
#include "storage/kv_block_key.h"
#include "storage/storage_layout.h"
#include "storage/thread_pool.h"

namespace flashdesk::storage {

class Database;

struct KvBlockStoreOptions {
  // Tokens per block: a multiple of every compress ratio (and of the indexer's candidate block).
  int64_t tokens_per_block = 256;
  uint64_t disk_budget_bytes = uint64_t{16} << 30;
  std::chrono::milliseconds retention = std::chrono::hours(72);
  Clock clock = system_now_ms;
  // Reconcile files and index at open (orphans, temporary files, rows without files). Only the
  // owner of the data folder (the holder of its InstanceLock) may: another process may be writing.
  bool repair = false;
  ReaderOptions reader{};
  // Blocks waiting to be written beyond this many bytes are dropped (spilling is best effort;
  // generation never waits for the disk).
  uint64_t max_queued_bytes = uint64_t{256} << 20;
};

// One block to write. `key` must be block_key(model_fingerprint, parent, tokens...) of its tokens.
struct BlockWrite {
  BlockKey key;
  std::optional<BlockKey> parent;
  std::string model_fingerprint;
  int64_t token_count = 0;
  std::vector<uint8_t> payload;       // the engine's serialised KV for these tokens
  std::optional<int64_t> session_id;  // the session whose prompt holds the block
};

enum class WriteStatus {
  written,
  already_stored,  // another prompt with the same prefix wrote it first
  disk_full,       // nothing was left behind; later writes try again
  failed,          // another I/O error; nothing was left behind
  dropped,         // the queue was full, or the session was deleted meanwhile
};
std::string_view to_string(WriteStatus status);

struct WriteOutcome {
  WriteStatus status = WriteStatus::written;
  std::string message;  // for the UI when not written
};

enum class ReadStatus { hit, not_stored, corrupt, io_error };
std::string_view to_string(ReadStatus status);

struct BlockRead {
  BlockKey key;
  ReadStatus status = ReadStatus::not_stored;
  std::string message;                      // why, when not a hit
  std::shared_ptr<const ReadArena> memory;  // keeps `file` alive (shared by one get()'s blocks)
  std::span<const uint8_t> file;            // the whole file when a hit

  std::span<const uint8_t> payload() const;  // the engine's bytes (empty unless a hit)
};

// What the prefix planner needs, without reading any payload.
struct PrefixMatch {
  int64_t covered_tokens = 0;          // leading prompt tokens whose blocks are all stored
  std::vector<BlockKey> covered_keys;  // their keys, in order (what to get())
  std::vector<BlockKey> all_keys;      // keys of every full block of the prompt (to put() the rest)
};

struct EvictionReport {
  int64_t expired = 0;      // unused for longer than the retention time
  int64_t over_budget = 0;  // least recently used, while over the disk budget
  int64_t unreachable = 0;  // their parent block was gone
  int64_t bytes_freed = 0;
};

struct ReconcileReport {
  int64_t orphan_files = 0;        // block files without an index row
  int64_t temp_files = 0;          // left by an interrupted write
  int64_t rows_without_files = 0;  // or whose file has the wrong size
  EvictionReport eviction;
};

struct KvStoreStats {
  int64_t blocks = 0;
  int64_t bytes = 0;
  int64_t writes_ok = 0;
  int64_t writes_failed = 0;  // disk full, I/O errors, dropped
  int64_t reads_hit = 0;
  int64_t reads_missed = 0;
  int64_t reads_corrupt = 0;  // detected, deleted, reported as a miss
  std::optional<std::string> last_write_error;
};

class KvBlockStore {
 public:
  // Opens its own connections to the (migrated) session database; creates the block folder.
  KvBlockStore(StorageLayout layout, KvBlockStoreOptions options = {});
  ~KvBlockStore();  // finishes the queued writes
  KvBlockStore(const KvBlockStore&) = delete;
  KvBlockStore& operator=(const KvBlockStore&) = delete;

  int64_t tokens_per_block() const { return options_.tokens_per_block; }
  const ReconcileReport& reconcile_report() const { return reconcile_report_; }
  std::string_view reader_name() const { return reader_->name(); }

  // Walks the prompt's chained keys block by block and stops at the first block not stored.
  PrefixMatch match_prefix(std::string_view model_fingerprint, std::span<const TokenId> prompt,
                           std::span<const ImageSpan> images);

  // Queues a block for writing (temporary file, fsync, rename, then the index row). Never blocks
  // on the disk. Throws InvalidRequest for a malformed block (wrong token count, no payload).
  std::future<WriteOutcome> put(BlockWrite block);
  void flush();  // returns when every block queued before the call is written or failed

  // Reads the blocks in parallel and verifies each; results[i] is for keys[i]. A block that fails
  // verification is deleted (file and row) and reported as corrupt, its payload never handed out.
  // Hits count as a use (LRU); with a session, the blocks are linked to it.
  std::vector<BlockRead> get(std::span<const BlockKey> keys,
                             std::optional<int64_t> session_id = std::nullopt);

  // Records that the session's prompt uses these blocks (delete erases blocks only it uses).
  void link_session(int64_t session_id, std::span<const BlockKey> keys);

  EvictionReport evict();  // retention, then budget, then blocks no walk can reach
  KvStoreStats stats();

 private:
  struct Queued {
    BlockWrite block;
    std::promise<WriteOutcome> done;
  };

  static constexpr size_t kMaxWriteBatch = 16;  // blocks per index transaction

  void run_writer();
  std::vector<WriteOutcome> write_batch(Database& db, std::vector<Queued>& batch);
  BlockRow write_block_file(const BlockWrite& block, const std::filesystem::path& path,
                            int64_t now);
  void index_batch(Database& db, std::vector<Queued>& batch,
                   std::vector<std::optional<BlockRow>>& rows, std::vector<WriteOutcome>& outcomes,
                   int64_t now);
  ReconcileReport reconcile(Database& db);
  EvictionReport evict_with(Database& db);
  void erase_blocks(Database& db, std::span<const BlockRow> rows);
  BlockRead verify(const BlockKey& key, const BlockRow& row, const ReadResult& read);

  StorageLayout layout_;
  KvBlockStoreOptions options_;
  std::unique_ptr<BlockReader> reader_;
  ReconcileReport reconcile_report_;

  std::mutex db_mutex_;  // guards db_ (callers' connection)
  std::unique_ptr<Database> db_;
  std::unique_ptr<Database> writer_db_;  // the writer thread's connection

  std::mutex queue_mutex_;
  std::condition_variable queue_wake_;
  std::condition_variable queue_idle_;
  std::deque<Queued> queue_;
  std::unordered_set<BlockKey, Digest128Hash> queued_keys_;
  uint64_t queued_bytes_ = 0;
  bool writing_ = false;
  bool stopping_ = false;

  std::atomic<int64_t> writes_ok_{0}, writes_failed_{0}, reads_hit_{0}, reads_missed_{0},
      reads_corrupt_{0};
  std::mutex error_mutex_;
  std::optional<std::string> last_write_error_;

  ThreadPool io_pool_{4};  // writes a batch's files and verifies read blocks in parallel
  std::thread writer_;
};

}  // namespace flashdesk::storage
