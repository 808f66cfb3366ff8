// The cache that lets a large model's weights be hashed once: per file, its SHA-256 content
// digest keyed by the file's identity (path, device, inode, size, modification and change times).
//
// Invalidation: an entry is used only when every part of the identity is unchanged, so a rewritten,
// replaced, truncated, touched or chmod-ed file is hashed again (the change time moves on any of
// those and cannot be set back). An entry is only written for a file whose times are at least
// kRacyMarginNs older than the moment hashing began: a file written during or just before hashing
// may change again within one timestamp tick without its identity showing it. Entries of files
// that are gone or changed are dropped on save; at most kMaxEntries are kept (the newest).
//
// Format (text, one entry per line after the first):
//   flashdesk-weight-digests 1
//   <64 hex digest>\t<size>\t<mtime ns>\t<ctime ns>\t<device>\t<inode>\t<absolute path>
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/util/file_identity.h"
#include "engine/util/sha256.h"

namespace flashdesk {

inline constexpr int64_t kRacyMarginNs = int64_t{2'000'000'000};  // FAT's 2 s mtime included
inline constexpr size_t kMaxEntries = 1024;

// $XDG_CACHE_HOME/flashdesk/weight-digests.tsv (beside the app's KV cache); empty when there is
// no home folder, i.e. no cache.
std::filesystem::path default_weight_digest_cache();

class WeightDigestCache {
 public:
  // Reads `file`; a missing file is an empty cache. Anything malformed is a FormatError naming
  // the file and the line.
  static WeightDigestCache load(const std::filesystem::path& file);
  // Parses the text of a cache file (`file` names it in errors).
  static WeightDigestCache parse(const std::string& text, const std::filesystem::path& file);

  std::optional<Sha256::Digest> find(const std::filesystem::path& path,
                                     const FileIdentity& id) const;
  // Records a digest computed from reading that began at `hashing_started_ns` (CLOCK_REALTIME),
  // unless the file was changed too shortly before (see the invalidation rule above). Returns
  // whether it was recorded.
  bool put(const std::filesystem::path& path, const FileIdentity& id, const Sha256::Digest& digest,
           int64_t hashing_started_ns);
  // Writes the cache atomically (temporary file + rename), without entries whose file is gone or
  // changed. Throws IoError when it cannot be written.
  void save(const std::filesystem::path& file) const;

  std::string text() const;  // what save() writes, for tests
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::filesystem::path path;  // absolute
    FileIdentity id;
    Sha256::Digest digest;
  };
  std::vector<Entry> entries_;  // oldest first
};

// The current time as hashing measures it (CLOCK_REALTIME, nanoseconds).
int64_t realtime_now_ns();

}  // namespace flashdesk
