// The Engram compressed-token map file (engram_map.safetensors: tensor `token_map`, I64
// [vocab_size]): the compressed id of each token id, precomputed from tokenizer.json by a tool
// (docs/model-spec.md §7 step 1) because the engine does not carry Unicode normalisation tables.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/config.h"

namespace flashdesk {

inline constexpr const char* kEngramMapTensor = "token_map";

// Checks the map's invariants: one entry per token id, values in [0, compressed_vocab_size),
// first occurrences numbered 0, 1, 2, ... in token-id order, every compressed id used.
// Throws FormatError naming `file` and the first offending token id.
void validate_engram_token_map(std::span<const int64_t> map, const TextConfig& text,
                               const std::string& file);

// Reads and validates the map file.
std::vector<int64_t> load_engram_token_map(const std::filesystem::path& path,
                                           const TextConfig& text);

// Writes the map and the hash multipliers ([layers][max n-gram size], tensor `multipliers`).
void write_engram_map(const std::filesystem::path& path, std::span<const int64_t> map,
                      const std::vector<std::vector<int64_t>>& multipliers);

}  // namespace flashdesk
