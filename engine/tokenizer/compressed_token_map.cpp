// Keys every token id and numbers the distinct keys in order of first appearance.
#include "engine/tokenizer/compressed_token_map.h"

#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/tokenizer/engram_normalizer.h"
#include "engine/tokenizer/utf8.h"

namespace flashdesk {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

std::string key_of(const Tokenizer& tokenizer, TokenId id) {
  if (!tokenizer.contains(id)) return {};  // HF decodes an id with no token to ""
  const std::string text = utf8::to_valid(tokenizer.token_bytes(id));
  if (text.find(kReplacementChar) != std::string::npos)
    return std::string(*tokenizer.token_string(id));
  std::string normalized = engram_normalize(text);
  return normalized.empty() ? text : normalized;
}

}  // namespace

CompressedTokenMap build_compressed_token_map(const Tokenizer& tokenizer) {
  CompressedTokenMap map;
  const int64_t n = tokenizer.size();
  map.ids.resize(static_cast<size_t>(n));
  std::unordered_map<std::string, int64_t> compressed_of;
  compressed_of.reserve(static_cast<size_t>(n));
  for (int64_t id = 0; id < n; ++id) {
    const auto [it, added] =
        compressed_of.try_emplace(key_of(tokenizer, static_cast<TokenId>(id)), map.size);
    if (added) ++map.size;
    map.ids[static_cast<size_t>(id)] = it->second;
  }
  return map;
}

}  // namespace flashdesk
