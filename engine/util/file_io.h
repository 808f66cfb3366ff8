// Small-file reads and crash-safe writes: a file is written under a temporary name, synced and
// renamed over the target, so readers never see a half-written checkpoint, config or block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace flashdesk {

// Reads a whole (small) file; throws IoError naming it when it cannot be read or is larger
// than max_bytes (config and index files are kilobytes; this guards against reading a shard).
std::string read_small_file(const std::filesystem::path& path, size_t max_bytes = 64u << 20);

// A file being written at `path`: bytes go to `<path>.tmp-<pid>` until commit() syncs it and
// renames it into place. Destroyed without commit(), the temporary file is removed.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Sets the final size (sparse until written), so chunks can be written in any order.
  void resize(uint64_t size);
  // Writes `bytes` at `offset` (thread-safe: positional writes). Throws IoError on failure.
  void write_at(uint64_t offset, std::span<const uint8_t> bytes);
  void commit();

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
};

void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

}  // namespace flashdesk
