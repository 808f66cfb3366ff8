// Reading many whole block files at once, fast: io_uring (where built and allowed by the kernel)
// keeps many large reads in flight from one thread; otherwise pread on a thread pool; a plain
// sequential pread loop is kept as the benchmark's baseline. O_DIRECT (bypassing the page cache) is
// on by default: it measured several times faster for cold files and about even for cached ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashdesk::storage {

inline constexpr size_t kIoAlignment = 4096;  // O_DIRECT buffers, offsets and lengths

// One allocation holding every file of a batch read: 2 MiB-aligned and backed by transparent huge
// pages where the kernel allows, because faulting in fresh 4 KiB pages costs more than the read
// itself on some machines (measured by kv_store_bench). Block payloads point into it.
class ReadArena {
 public:
  explicit ReadArena(size_t bytes);  // throws std::bad_alloc
  uint8_t* data() { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

struct ReadRequest {
  std::filesystem::path path;
  uint64_t expected_size = 0;  // from the index; the slot holds this many bytes + one page
};

struct ReadResult {
  std::span<uint8_t> slot;  // this file's part of the arena (4096-aligned)
  size_t size = 0;          // bytes read: the whole file, or less when the file was shorter
  int error = 0;            // errno of a failed open or read, 0 when read
  std::span<const uint8_t> bytes() const { return slot.first(size); }
};

struct ReadBatch {
  std::shared_ptr<ReadArena> arena;  // owns the memory every result points into
  std::vector<ReadResult> results;   // results[i] belongs to requests[i]
};

// Carves one 4096-aligned slot per request out of a fresh arena.
ReadBatch make_read_batch(std::span<const ReadRequest> requests);

enum class ReadMethod { automatic, io_uring, thread_pool, sequential };

struct ReaderOptions {
  ReadMethod method = ReadMethod::automatic;
  int threads = 4;       // thread_pool
  int queue_depth = 32;  // io_uring: reads in flight
  // O_DIRECT where the file system supports it (else buffered): 3-4x faster cold reads in
  // kv_store_bench, about even when the files are in the page cache.
  bool direct_io = true;
};

class BlockReader {
 public:
  virtual ~BlockReader() = default;
  // Reads each file whole into one arena. Thread-safe.
  virtual ReadBatch read_all(std::span<const ReadRequest> requests) = 0;
  virtual std::string_view name() const = 0;
};

// automatic = io_uring when built and the kernel allows it, else the thread pool.
std::unique_ptr<BlockReader> make_block_reader(const ReaderOptions& options);

// One file into its slot, with pread (shared by the pread readers).
void read_file_pread(const ReadRequest& request, bool direct_io, ReadResult& result);

// Opens for reading, with O_DIRECT when asked and supported; returns -1 and sets errno on failure.
int open_for_read(const std::filesystem::path& path, bool direct_io);

// The io_uring reader, or nullptr when liburing is not built in or the kernel refuses it.
std::unique_ptr<BlockReader> make_uring_reader(const ReaderOptions& options);

}  // namespace flashdesk::storage
