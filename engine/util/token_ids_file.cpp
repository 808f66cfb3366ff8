// Parser of token-id list files (JSON array or whitespace-separated integers).
#include "engine/util/token_ids_file.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

int32_t checked_id(int64_t v, const std::string& file, size_t index) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    throw FormatError(
        file, "id #" + std::to_string(index) + " (" + std::to_string(v) + ") is out of range");
  return static_cast<int32_t>(v);
}

std::vector<int32_t> parse_json(std::string_view text, const std::string& file) {
  // A flat array has one '[' and no '{': refusing nesting up front also keeps a hostile file
  // from building a deeply nested value.
  if (std::count(text.begin(), text.end(), '[') != 1 || text.find('{') != std::string_view::npos)
    throw FormatError(file, "not a flat JSON array of token ids");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) throw FormatError(file, "not a JSON array of token ids");
  std::vector<int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer())
      throw FormatError(file, "element #" + std::to_string(ids.size()) + " is not an integer");
    ids.push_back(checked_id(v.get<int64_t>(), file, ids.size()));
  }
  return ids;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::vector<int32_t> parse_token_ids(std::string_view text, const std::string& file) {
  size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i < text.size() && text[i] == '[') return parse_json(text, file);
  std::vector<int32_t> ids;
  while (i < text.size()) {
    size_t end = i;
    while (end < text.size() && !is_space(text[end])) ++end;
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + end, v);
    if (ec != std::errc() || ptr != text.data() + end)
      throw FormatError(file, "'" + std::string(text.substr(i, std::min<size_t>(end - i, 32))) +
                                  "' is not a token id");
    ids.push_back(checked_id(v, file, ids.size()));
    i = end;
    while (i < text.size() && is_space(text[i])) ++i;
  }
  return ids;
}

std::vector<int32_t> read_token_ids(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_token_ids(ss.str(), path.string());
}

}  // namespace flashdesk
