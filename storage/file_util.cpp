// Crash-safe file helpers: every write goes through a temporary name, fsync and rename.
#include "storage/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace flashdesk::storage {

namespace fs = std::filesystem;

void throw_errno(std::string_view operation, const fs::path& path, int err) {
  std::string msg = std::string(operation) + " " + path.string() + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) throw DiskFullError(msg);
  throw IoError(msg);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

fs::path temp_path_for(const fs::path& final_path) {
  static std::atomic<uint64_t> counter{0};
  std::string name = final_path.filename().string();
  name += kTempMarker;
  name += std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  return final_path.parent_path() / name;
}

bool is_temp_name(const fs::path& path) {
  return path.filename().string().find(kTempMarker) != std::string::npos;
}

namespace {

void write_all(int fd, std::span<const uint8_t> bytes, const fs::path& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("write", path, errno);
    if (n == 0) throw_errno("write", path, ENOSPC);
    done += static_cast<size_t>(n);
  }
}

void write_and_sync(const fs::path& temp, std::span<const std::span<const uint8_t>> parts) {
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) throw_errno("create", temp, errno);
  for (const auto& part : parts) write_all(fd.get(), part, temp);
  if (::fdatasync(fd.get()) != 0) throw_errno("fdatasync", temp, errno);
  if (::close(fd.release()) != 0) throw_errno("close", temp, errno);
}

}  // namespace

void write_file_atomic(const fs::path& path, std::span<const std::span<const uint8_t>> parts,
                       bool sync_folder) {
  const fs::path temp = temp_path_for(path);
  try {
    write_and_sync(temp, parts);
    if (::rename(temp.c_str(), path.c_str()) != 0) throw_errno("rename", temp, errno);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  if (sync_folder) fsync_directory(path.parent_path());
}

void fsync_directory(const fs::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw_errno("open folder", dir, errno);
  if (::fsync(fd.get()) != 0 && errno != EINVAL) throw_errno("fsync folder", dir, errno);
}

std::vector<uint8_t> read_whole_file(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("open", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("stat", path, errno);
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pread(fd.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("read", path, errno);
    if (n == 0) break;  // the file shrank under us
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

bool remove_file_if_present(const fs::path& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  throw_errno("remove", path, errno);
}

}  // namespace flashdesk::storage
