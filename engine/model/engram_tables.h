// The Engram hash tables of a model: the compressed-token map (the directory's
// engram_map.safetensors when it has one, else built from the tokenizer, through the cache of
// engram_map_cache.h), the multipliers (computed as the official code does) and the primes
// (computed from the config).
#pragma once

#include <filesystem>
#include <string>

#include "engine/checkpoint/checkpoint.h"
#include "engine/model/engram_hash.h"
#include "engine/tokenizer/tokenizer.h"

namespace flashdesk {

struct EngramMapOptions {
  const Tokenizer* tokenizer = nullptr;  // null: the directory's tokenizer.json is read if needed
  std::filesystem::path cache_dir{};     // where built maps are kept; empty: not kept
};

struct EngramTables {
  EngramHashTables tables;
  std::string map_source;  // the file the token map came from (engram_map or tokenizer.json)
};

// Throws FormatError naming the file and field when the map cannot be had or disagrees with the
// config (engram_compressed_vocab_size) or the tokenizer (its length).
EngramTables load_engram_tables(const Checkpoint& checkpoint, const EngramMapOptions& options);

}  // namespace flashdesk
