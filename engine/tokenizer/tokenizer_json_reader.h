// Reads tokenizer.json in one SAX pass: model.vocab and model.merges (over 100k entries each)
// go straight into vectors, the rest into a small JSON DOM. A DOM of the whole file (std::map
// per object) took most of the load time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashdesk {

struct TokenizerJsonDocument {
  nlohmann::json root;  // everything except the two lists below (which are left empty in it)
  std::optional<std::vector<std::pair<std::string, int32_t>>> vocab;       // model.vocab
  std::optional<std::vector<std::pair<std::string, std::string>>> merges;  // model.merges
};

// FormatError naming `file` on invalid JSON or a malformed vocab/merges entry.
TokenizerJsonDocument read_tokenizer_json(std::string_view text, const std::string& file);

}  // namespace flashdesk
