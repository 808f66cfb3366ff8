// Whole numbers given on the command line (`--layers 0,3`, `--host-experts-from 31`,
// `--devices 4`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace flashdesk::cli {

// The whole of `text` as a number >= 0; nullopt for anything else (empty, negative, trailing
// characters, out of range).
std::optional<int64_t> parse_nonnegative_integer(const std::string& text);

}  // namespace flashdesk::cli
