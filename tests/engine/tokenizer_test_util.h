// Helpers shared by the tokenizer tests: test data paths and small tokenizers built in code.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/byte_level.h"

namespace flashdesk::test {

inline std::string tokenizer_data(const std::string& relative) {
  return std::string(FD_SOURCE_DIR) + "/tests/data/tokenizers/" + relative;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The pre-tokenizer of DeepSeek-V3's tokenizer.json, as found in the file.
inline nlohmann::json deepseek_pre_tokenizer() {
  const auto file = nlohmann::json::parse(read_file(tokenizer_data("tiny/tokenizer.json")));
  return file["pre_tokenizer"];
}

// A byte-level BPE tokenizer.json: the 256 byte tokens get ids 0..255 (byte order), each merge
// (spelled in bytes, not in the byte alphabet) the next id, then the added tokens given as JSON.
inline std::string byte_level_tokenizer(
    const std::vector<std::pair<std::string, std::string>>& merges,
    const nlohmann::json& added_tokens = nlohmann::json::array(),
    const nlohmann::json& pre_tokenizer = deepseek_pre_tokenizer()) {
  nlohmann::json vocab = nlohmann::json::object(), merge_list = nlohmann::json::array();
  const auto spell = [](const std::string& bytes) {
    std::string s;
    for (char c : bytes) s += byte_level::spell_byte(static_cast<uint8_t>(c));
    return s;
  };
  for (int b = 0; b < 256; ++b) vocab[byte_level::spell_byte(static_cast<uint8_t>(b))] = b;
  int next = 256;
  for (const auto& [a, b] : merges) {
    merge_list.push_back({spell(a), spell(b)});
    if (!vocab.contains(spell(a + b))) vocab[spell(a + b)] = next++;
  }
  nlohmann::json doc = {
      {"added_tokens", added_tokens},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre_tokenizer},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
  };
  return doc.dump();
}

inline nlohmann::json added_token(int id, const std::string& content, bool special = true) {
  return {{"id", id},        {"content", content},  {"special", special},  {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"single_word", false}};
}

}  // namespace flashdesk::test
