// Where FlashDesk keeps its files, the clock the stores read, and the lock that makes one process
// the owner of a data folder (only the owner repairs: folds crashed answers, removes orphans).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>

#include "storage/file_util.h"

namespace flashdesk::storage {

// Milliseconds since the Unix epoch; injected so tests can move time.
using Clock = std::function<int64_t()>;
int64_t system_now_ms();

struct StorageLayout {
  std::filesystem::path data_dir;   // database and attachments (user data: keep)
  std::filesystem::path cache_dir;  // KV blocks (recomputable: may be cleared)

  // $XDG_DATA_HOME/flashdesk (else ~/.local/share/flashdesk) and $XDG_CACHE_HOME/flashdesk (else
  // ~/.cache/flashdesk). Throws IoError when neither the variables nor a home folder exist.
  static StorageLayout from_environment();
  // Everything under one folder (the CLI's --data-dir, tests).
  static StorageLayout in(const std::filesystem::path& dir);

  std::filesystem::path database() const { return data_dir / "sessions.sqlite"; }
  std::filesystem::path attachments_dir() const { return data_dir / "attachments"; }
  std::filesystem::path kv_dir() const { return cache_dir / "kv"; }
  // Engram token maps built from published models' tokenizers (recomputable, like the KV).
  std::filesystem::path engram_map_dir() const { return cache_dir / "engram-maps"; }
  std::filesystem::path lock_file() const { return data_dir / "flashdesk.lock"; }

  void create_directories() const;  // throws IoError
};

// An exclusive flock on the layout's lock file, released on destruction or process death (so a
// crashed owner never leaves a stale lock).
class InstanceLock {
 public:
  // Empty when another process holds the lock.
  static std::optional<InstanceLock> try_acquire(const std::filesystem::path& lock_file);

 private:
  explicit InstanceLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace flashdesk::storage
