// The Engram compressed-token map file (engram_map.safetensors: tensor `token_map`, I64
// [len(tokenizer)], optionally `multipliers`, I64 [engram layers, max n-gram size]): the
// compressed id of each token id (docs/model-spec.md §7 step 1). A published V4.1 directory has
// none (the engine builds the map from tokenizer.json, engine/model/engram_tables.h); FlashDesk's
// random and demo checkpoints ship one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/config.h"

namespace flashdesk {

inline constexpr const char* kEngramMapTensor = "token_map";
inline constexpr const char* kEngramMultipliersTensor = "multipliers";

// What is wrong with a map's numbering, or "" when nothing is: first occurrences numbered 0, 1,
// 2, ... in token-id order, exactly `compressed_size` ids used. Names the first offending id.
std::string token_map_problem(std::span<const int64_t> map, int64_t compressed_size);

// Checks the map against the config: at least one entry and one for engram_pad_token_id, the
// numbering of token_map_problem with engram_compressed_vocab_size ids. The map may be longer or
// shorter than vocab_size (it covers the tokenizer, which HF lets differ from the embedding).
// Throws FormatError naming `file`.
void validate_engram_token_map(std::span<const int64_t> map, const TextConfig& text,
                               const std::string& file);

// Reads and validates the map file; a `multipliers` tensor in it must equal the official ones
// (engram_multipliers(text)), which the engine computes itself.
std::vector<int64_t> load_engram_token_map(const std::filesystem::path& path,
                                           const TextConfig& text);

// Writes the map and the hash multipliers ([layers][max n-gram size], tensor `multipliers`).
void write_engram_map(const std::filesystem::path& path, std::span<const int64_t> map,
                      const std::vector<std::vector<int64_t>>& multipliers);

}  // namespace flashdesk
