// Whole numbers given on the command line (`--layers 0,3`, `--host-experts-from 31`,
// `--devices 4`, `--synthetic-weights 7`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flashdesk::cli {

// The whole of `text` as a number >= 0; nullopt for anything else (empty, negative, trailing
// characters, out of range).
std::optional<int64_t> parse_nonnegative_integer(const std::string& text);

// The whole of `text` as a number 0 to 2^64 - 1 (a PRNG seed); nullopt for anything else.
std::optional<uint64_t> parse_unsigned_integer(const std::string& text);

// "20,24" -> {20, 24}: layer numbers for make-random's --layers and --synthetic-layers.
// InvalidRequest naming `option` for an empty list or an item that is not a number >= 0 (whether
// the layers exist is the config's to say).
std::vector<int64_t> parse_layer_list(const std::string& text, const std::string& option);

}  // namespace flashdesk::cli
