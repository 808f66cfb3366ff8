// What identifies a file's contents without reading them: device, inode, size and change times.
// Caches keyed by it (the weight digests) are valid as long as all of it is unchanged.
#pragma once

#include <compare>
#include <cstdint>

namespace flashdesk {

struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // last write of the data
  int64_t ctime_ns = 0;  // last change of the data or the inode (cannot be set back by a user)

  auto operator<=>(const FileIdentity&) const = default;
};

// Of an open descriptor (fstat); throws IoError naming `path_for_errors` when fstat fails.
FileIdentity file_identity(int fd, const char* path_for_errors);

}  // namespace flashdesk
