// A whole file mapped read-only (RAII): checkpoint shards are mapped, never read whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace flashdesk {

class MappedFile {
 public:
  // Maps `path` read-only; throws IoError naming the file when it cannot be opened or mapped.
  // An empty file maps to an empty span (mmap cannot map zero bytes).
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void unmap() noexcept;

  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace flashdesk
