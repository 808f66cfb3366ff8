// The compressed-token map built from a tokenizer, kept on disk so a 129K-token build runs once
// per tokenizer: `<cache_dir>/engram-map-<tokenizer SHA-256>.safetensors` (tensor token_map, I64
// [len(tokenizer)]; metadata: format, tokenizer_sha256, unicode_version, compressed_vocab_size,
// token_map_sha256). The app and the CLI put cache_dir beside the KV blocks.
//
// Goals: a cache file is used only when every check passes (it parses, names this tokenizer's
// hash and this ICU's Unicode version, its bytes hash to what it says, its numbering is valid,
// it has one entry per token); anything else is rebuilt and replaced, never trusted. Non-goals:
// eviction (one small file per tokenizer ever loaded).
#pragma once

#include <filesystem>
#include <string>

#include "engine/tokenizer/compressed_token_map.h"
#include "engine/tokenizer/tokenizer.h"

namespace flashdesk {

enum class TokenMapOrigin {
  Cache,  // read from a valid cache file
  Built,  // built from the tokenizer (and written to the cache when there is one)
};

struct CachedTokenMap {
  CompressedTokenMap map;
  TokenMapOrigin origin = TokenMapOrigin::Built;
  // Why an existing cache file was not used, or why the built map could not be written; empty
  // when neither happened.
  std::string note;
};

std::filesystem::path engram_map_cache_file(const std::filesystem::path& cache_dir,
                                            const Tokenizer& tokenizer);

// The map of `tokenizer`, from `cache_dir` when a valid file is there, else built (and written
// there; an empty cache_dir builds without caching). Never throws for a bad or unwritable cache.
CachedTokenMap cached_compressed_token_map(const Tokenizer& tokenizer,
                                           const std::filesystem::path& cache_dir);

}  // namespace flashdesk
