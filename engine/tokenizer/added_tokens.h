// Added tokens (special and not): found in the text before pre-tokenization, as HF does.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashdesk {

// An entry of tokenizer.json's added_tokens, with HF's meaning of each flag.
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;      // skipped by decode(skip_special); otherwise matched like the rest
  bool lstrip = false;       // the match swallows the whitespace before it
  bool rstrip = false;       // the match swallows the whitespace after it
  bool normalized = false;   // matched in the normalized text (second pass), not the raw text
  bool single_word = false;  // matched only when not touching a word character on either side
};

// A part of a text: an added token (token >= 0) or plain text to pre-tokenize (token < 0).
struct TextSegment {
  uint32_t begin;
  uint32_t end;
  int32_t token;
};

// Finds added tokens in a text: leftmost-longest, non-overlapping, as HF's Aho-Corasick pass.
class AddedTokenMatcher {
 public:
  // Matches the tokens given (HF builds one matcher for normalized and one for raw tokens);
  // `contents` may differ from tokens[i].content when it was normalized.
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& contents);

  // Appends the segments covering `text`, in order. Empty gaps are not emitted.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

  bool empty() const { return tokens_.empty(); }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> edges;  // sorted by byte
    int32_t token = -1;                              // index into tokens_
  };
  void add(const std::string& content, int32_t token_index);
  // Index of the longest token starting at text[i] and its length, or -1.
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t i) const;
  bool accept(const AddedToken& t, std::string_view text, size_t start, size_t stop) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace flashdesk
