// Leftmost-longest matching of added tokens with HF's lstrip/rstrip/single_word rules.
#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

#include "engine/tokenizer/unicode_class.h"
#include "engine/tokenizer/utf8.h"

namespace flashdesk {
namespace {

uint8_t flags_at(std::string_view text, size_t i) {
  const utf8::Unit u = utf8::decode(text, i);
  return u.valid() ? unicode::class_flags(u.cp) : 0;
}

// Start of the code point that ends at byte `end` (end > 0).
size_t start_of_last(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && end - i < 4 && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80) --i;
  return utf8::decode(text, i).size == end - i ? i : end - 1;
}

bool space_before(std::string_view text, size_t end) {
  return end > 0 && (flags_at(text, start_of_last(text, end)) & unicode::kSpace);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     const std::vector<std::string>& contents)
    : tokens_(std::move(tokens)), nodes_(1) {
  for (size_t i = 0; i < tokens_.size(); ++i) add(contents[i], static_cast<int32_t>(i));
}

void AddedTokenMatcher::add(const std::string& content, int32_t token_index) {
  if (content.empty()) return;
  first_byte_[static_cast<uint8_t>(content[0])] = true;
  int32_t node = 0;
  for (char ch : content) {
    const auto b = static_cast<uint8_t>(ch);
    auto& edges = nodes_[node].edges;
    const auto it = std::lower_bound(edges.begin(), edges.end(), std::make_pair(b, int32_t{-1}));
    if (it != edges.end() && it->first == b) {
      node = it->second;
      continue;
    }
    const auto child = static_cast<int32_t>(nodes_.size());
    edges.insert(it, {b, child});
    nodes_.emplace_back();  // invalidates `edges`; not used again
    node = child;
  }
  if (nodes_[node].token < 0) nodes_[node].token = token_index;  // the first of duplicates wins
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t i) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t j = i; j < text.size(); ++j) {
    const auto& edges = nodes_[node].edges;
    const auto b = static_cast<uint8_t>(text[j]);
    const auto it = std::lower_bound(edges.begin(), edges.end(), std::make_pair(b, int32_t{-1}));
    if (it == edges.end() || it->first != b) break;
    node = it->second;
    if (nodes_[node].token >= 0) best = {nodes_[node].token, j + 1 - i};
  }
  return best;
}

bool AddedTokenMatcher::accept(const AddedToken& t, std::string_view text, size_t start,
                               size_t stop) const {
  if (!t.single_word) return true;
  const bool word_before =
      start > 0 && (flags_at(text, start_of_last(text, start)) & unicode::kWord);
  const bool word_after = stop < text.size() && (flags_at(text, stop) & unicode::kWord);
  return !word_before && !word_after;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  size_t emitted = 0;  // end of what has been emitted so far
  for (size_t i = 0; i < text.size();) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    const auto [index, length] = longest_at(text, i);
    if (index < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[index];
    size_t start = i, stop = i + length;
    i = stop;  // like an Aho-Corasick iterator, a rejected match is still consumed
    if (!accept(t, text, start, stop)) continue;
    if (t.lstrip)
      while (start > emitted && space_before(text, start)) start = start_of_last(text, start);
    if (t.rstrip)
      while (stop < text.size() && (flags_at(text, stop) & unicode::kSpace))
        stop += utf8::decode(text, stop).size;
    if (emitted < start) out.push_back({uint32_t(emitted), uint32_t(start), -1});
    out.push_back({uint32_t(start), uint32_t(stop), t.id});
    emitted = i = stop;
  }
  if (emitted < text.size()) out.push_back({uint32_t(emitted), uint32_t(text.size()), -1});
}

}  // namespace flashdesk
