// A whole file held read-only (RAII): checkpoint shards are mapped, never read whole, unless they
// are small. A file of at most `copy_limit` bytes is read into private memory instead, so that
// truncating or rewriting it while the app runs cannot reach what the engine reads; a mapped file
// that shrinks under a reader raises SIGBUS, which mapped_file_guard.h turns into a message
// naming the file. The descriptor stays open for the object's life, so identity() and pread()
// see the very file that was mapped even after the path is replaced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "engine/util/file_identity.h"

namespace flashdesk {

// Files up to this size are copied by default: the demo model and Engram maps, not the shards of
// a large model (copying those would double their memory with the page cache).
inline constexpr uint64_t kDefaultCopyLimit = uint64_t{256} << 20;

class MappedFile {
 public:
  // Opens `path`; throws IoError naming the file when it cannot be opened, read or mapped, or
  // changes size while being copied. An empty file is an empty span (mmap cannot map 0 bytes).
  explicit MappedFile(const std::filesystem::path& path, uint64_t copy_limit = kDefaultCopyLimit);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }
  // Whether the bytes are a private copy (true) or a mapping of the file (false).
  bool copied() const { return copied_; }
  // The file as it was when opened.
  const FileIdentity& identity() const { return identity_; }
  // The open descriptor (for reading the same file again without the mapping).
  int fd() const { return fd_; }

 private:
  void release() noexcept;

  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool copied_ = false;
  int fd_ = -1;
  FileIdentity identity_;
};

}  // namespace flashdesk
