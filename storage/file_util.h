// Files the crash-safe way: RAII descriptors, errno turned into typed errors, and atomic writes
// (temporary name in the same folder, fsync, rename, fsync of the folder).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/error.h"

namespace flashdesk::storage {

// The disk (or a quota, or a file-size limit) is full: the write failed and left nothing behind.
// The UI shows it; the store keeps working.
class DiskFullError : public IoError {
 public:
  using IoError::IoError;
};

// Throws DiskFullError for ENOSPC/EDQUOT/EFBIG, IoError otherwise; names the operation and path.
[[noreturn]] void throw_errno(std::string_view operation, const std::filesystem::path& path,
                              int err);

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// Marker inside temporary file names; start-up cleanup removes files that carry it.
inline constexpr std::string_view kTempMarker = ".tmp-";

// A unique temporary name beside `final_path` (same folder, so rename is atomic).
std::filesystem::path temp_path_for(const std::filesystem::path& final_path);
bool is_temp_name(const std::filesystem::path& path);

// Writes the parts, in order, to a temporary file, syncs it (fdatasync: data and size), renames it
// to `path` and, unless the caller batches that, fsyncs the folder (which makes the rename
// durable). On any failure the temporary file is removed and the error thrown; `path` is untouched.
void write_file_atomic(const std::filesystem::path& path,
                       std::span<const std::span<const uint8_t>> parts, bool sync_folder = true);

void fsync_directory(const std::filesystem::path& dir);

std::vector<uint8_t> read_whole_file(const std::filesystem::path& path);

// Removes a file; a missing file is not an error. Returns whether something was removed.
bool remove_file_if_present(const std::filesystem::path& path);

}  // namespace flashdesk::storage
