// POSIX behind MappedFile: mmap for large files (guarded against SIGBUS), a private copy read with
// pread for small ones.
#include "engine/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "engine/util/error.h"
#include "engine/util/mapped_file_guard.h"

namespace flashdesk {
namespace {

[[noreturn]] void throw_io(const std::filesystem::path& path, const char* what, int err) {
  throw IoError(path.string() + ": cannot " + what + ": " + std::strerror(err));
}

// Anonymous pages filled from the file; the file may be truncated or rewritten afterwards.
uint8_t* read_copy(int fd, size_t size, const std::filesystem::path& path) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw_io(path, "allocate memory for", errno);
  auto* bytes = static_cast<uint8_t*>(p);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::munmap(p, size);
      if (err != 0) throw_io(path, "read", err);
      throw IoError(path.string() + ": the file shrank from " + std::to_string(size) + " to " +
                    std::to_string(done) + " bytes while it was being read");
    }
    done += static_cast<size_t>(n);
  }
  ::mprotect(p, size, PROT_READ);  // read-only like a mapping: a stray write is a crash, not data
  return bytes;
}

}  // namespace

FileIdentity file_identity(int fd, const char* path_for_errors) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_io(path_for_errors, "stat", errno);
  FileIdentity id;
  id.device = static_cast<uint64_t>(st.st_dev);
  id.inode = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  id.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  return id;
}

MappedFile::MappedFile(const std::filesystem::path& path, uint64_t copy_limit) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw_io(path, "open", errno);
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_io(path, "stat", errno);
    if (!S_ISREG(st.st_mode)) throw IoError(path.string() + ": not a regular file");
    identity_ = file_identity(fd_, path.c_str());
    size_ = static_cast<size_t>(identity_.size);
    if (size_ == 0) return;
    copied_ = size_ <= copy_limit;
    if (copied_) {
      data_ = read_copy(fd_, size_, path);
      return;
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) throw_io(path, "mmap", errno);
    data_ = static_cast<const uint8_t*>(p);
    guard_mapping(data_, size_, path);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

MappedFile::~MappedFile() {
  release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      copied_(std::exchange(other.copied_, false)),
      fd_(std::exchange(other.fd_, -1)),
      identity_(other.identity_) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    copied_ = std::exchange(other.copied_, false);
    fd_ = std::exchange(other.fd_, -1);
    identity_ = other.identity_;
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) {
    if (!copied_) unguard_mapping(data_);
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

}  // namespace flashdesk
