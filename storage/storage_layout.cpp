// XDG folders, the data-folder lock and the wall clock.
#include "storage/storage_layout.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <system_error>

#include "engine/util/xdg_dirs.h"

namespace flashdesk::storage {

namespace fs = std::filesystem;

int64_t system_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

StorageLayout StorageLayout::from_environment() {
  return {xdg_dir("XDG_DATA_HOME", ".local/share") / "flashdesk", flashdesk_cache_dir()};
}

StorageLayout StorageLayout::in(const fs::path& dir) {
  return {dir, dir};
}

void StorageLayout::create_directories() const {
  for (const fs::path& dir : {data_dir, attachments_dir(), kv_dir()}) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw IoError("cannot create folder " + dir.string() + ": " + ec.message());
  }
}

std::optional<InstanceLock> InstanceLock::try_acquire(const fs::path& lock_file) {
  UniqueFd fd(::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) throw_errno("open lock file", lock_file, errno);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return std::nullopt;
    throw_errno("lock", lock_file, errno);
  }
  return InstanceLock(std::move(fd));
}

}  // namespace flashdesk::storage
