// Token-id lists as tools exchange them (`flashdesk-cli logits --ids`, `--decode-ids`): a JSON
// array of integers, or integers separated by whitespace.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace flashdesk {

// Throws FormatError naming `file` for anything but a flat list of integers in int32 range.
std::vector<int32_t> parse_token_ids(std::string_view text, const std::string& file);
// Reads and parses a file; IoError when it cannot be read.
std::vector<int32_t> read_token_ids(const std::filesystem::path& path);

}  // namespace flashdesk
