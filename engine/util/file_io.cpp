// POSIX implementation of the small-file reader and the write-then-rename writer.
#include "engine/util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

[[noreturn]] void throw_io(const std::filesystem::path& path, const std::string& what, int err) {
  throw IoError(path.string() + ": cannot " + what + ": " + std::strerror(err));
}

// Makes the rename durable: without syncing the directory, a crash may forget the new name.
void sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems refuse directory fds
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string read_small_file(const std::filesystem::path& path, size_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError(path.string() + ": cannot read: " + ec.message());
  if (size > max_bytes)
    throw IoError(path.string() + ": too large to read (" + std::to_string(size) +
                  " bytes, limit " + std::to_string(max_bytes) + ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_io(path, "open", errno);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<size_t>(in.gcount()) != size) throw IoError(path.string() + ": short read");
  return text;
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)) {
  temp_path_ = path_;
  temp_path_ += ".tmp-" + std::to_string(::getpid());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io(temp_path_, "create", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void AtomicFileWriter::resize(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) throw_io(temp_path_, "resize", errno);
}

void AtomicFileWriter::write_at(uint64_t offset, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_io(temp_path_, "write", n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) throw_io(temp_path_, "sync", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw_io(temp_path_, "close", errno);
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path_.c_str());
    throw_io(path_, "rename into place", err);
  }
  sync_directory(path_.parent_path());
}

void write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  AtomicFileWriter out(path);
  out.write_at(0, {reinterpret_cast<const uint8_t*>(contents.data()), contents.size()});
  out.commit();
}

}  // namespace flashdesk
