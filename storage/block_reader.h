// Reading many whole block files at once, fast: io_uring (where built and allowed by the kernel)
// keeps many large reads in flight from one thread; otherwise pread on a thread pool; a plain
// sequential pread loop is kept as the benchmark's baseline. O_DIRECT (bypassing the page cache) is
// an option: it helps only for data too cold or too big for the cache (see the benchmark).
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

// Heap memory aligned for O_DIRECT; its size is what was read, its capacity a multiple of 4096.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t capacity);  // rounds up to kIoAlignment; throws std::bad_alloc
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  void set_size(size_t n);
  std::span<const uint8_t> bytes() const { return {data_.get(), size_}; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

struct ReadRequest {
  std::filesystem::path path;
  uint64_t expected_size = 0;  // from the index; the buffer holds up to this many bytes + slack
};

struct ReadResult {
  AlignedBuffer bytes;  // the whole file (shorter when the file was)
  int error = 0;        // errno of a failed open or read, 0 when read
};

enum class ReadMethod { automatic, io_uring, thread_pool, sequential };

struct ReaderOptions {
  ReadMethod method = ReadMethod::automatic;
  int threads = 4;         // thread_pool
  int queue_depth = 32;    // io_uring: reads in flight
  bool direct_io = false;  // O_DIRECT, where the file system supports it (else buffered)
};

class BlockReader {
 public:
  virtual ~BlockReader() = default;
  // Reads each file whole; results[i] belongs to requests[i]. Thread-safe.
  virtual std::vector<ReadResult> read_all(std::span<const ReadRequest> requests) = 0;
  virtual std::string_view name() const = 0;
};

// automatic = io_uring when built and the kernel allows it, else the thread pool.
std::unique_ptr<BlockReader> make_block_reader(const ReaderOptions& options);

// One file, with pread (shared by the pread readers; also used for single reads).
ReadResult read_file_pread(const ReadRequest& request, bool direct_io);

// Opens for reading, with O_DIRECT when asked and supported; returns -1 and sets errno on failure.
int open_for_read(const std::filesystem::path& path, bool direct_io);

// The io_uring reader, or nullptr when liburing is not built in or the kernel refuses it.
std::unique_ptr<BlockReader> make_uring_reader(const ReaderOptions& options);

}  // namespace flashdesk::storage
