// Content digests of a checkpoint's safetensors files: what makes the checkpoint fingerprint (and
// so every cached KV block key) change when any weight byte changes.
//
// A file's digest is SHA-256 over a tag, the file size, the chunk size and the SHA-256 of each
// 4 MiB chunk in order. Chunks rather than one stream because chunks hash on several threads at
// once, and a chunk lying in a hole of a sparse file is known to be zeros without being read (the
// full-size skeleton checkpoints of the tests are 475 GiB of holes). Digests are cached by file
// identity (weight_digest_cache.h), so a large model is read in full once, not at every start.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "engine/util/mapped_file.h"
#include "engine/util/sha256.h"

namespace flashdesk {

// Small enough that a sparse file's header chunk is cheap to read (a full-size skeleton: 32 chunks
// of data, 121,000 of holes), large enough that a chunk is one read and its digest 1/131072 of it.
inline constexpr uint64_t kDigestChunkBytes = uint64_t{4} << 20;

struct WeightDigestReport {
  size_t files = 0;
  size_t from_cache = 0;    // files whose digest the cache gave
  uint64_t bytes_read = 0;  // bytes read and hashed this time (holes are not read)
  double seconds = 0;       // wall time of the whole digest step
  int threads = 0;          // threads that hashed
  std::string cache_note;   // what went wrong with the cache (unreadable, unwritable); or empty
  // Non-empty for a synthetic checkpoint (no files, nothing digested): what generates its
  // weights, e.g. "make-random seed 7" (synthetic_checkpoint.h).
  std::string synthesised;
};

struct WeightDigests {
  std::vector<Sha256::Digest> digests;  // one per file, in the order given
  WeightDigestReport report;
};

// The digests of `files` (held by MappedFile: a copied file is hashed from memory, a mapped one
// read again through its descriptor, never through the mapping). `cache_file` empty: no cache.
// A cache that cannot be read or written is noted in the report, never fatal. Throws IoError when
// a file cannot be read or shrinks while being hashed.
WeightDigests digest_weight_files(std::span<const MappedFile* const> files,
                                  const std::filesystem::path& cache_file);

}  // namespace flashdesk
