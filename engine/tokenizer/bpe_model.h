// The BPE model of a tokenizer.json: vocab, merges by rank, unknown-character handling.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tokenizer/merge_table.h"
#include "engine/tokenizer/string_id_map.h"

namespace flashdesk {

// Ids index dense tables; a file claiming larger ones is malformed (real vocabs are < 2^18).
constexpr int32_t kMaxTokenId = (1 << 24) - 1;

// The "model" object of tokenizer.json once parsed (type BPE).
struct BpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;       // spelling -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::optional<std::string> unk_token;
  bool byte_fallback = false;  // unknown characters become <0xXX> tokens
  bool ignore_merges = false;  // a piece spelled exactly like a vocab token is that token
  bool byte_level = false;     // pieces are bytes spelled in the GPT-2 alphabet (ByteLevel)
};

// Reused buffers of one encode call.
struct BpeScratch {
  std::vector<int32_t> symbols;
  std::vector<int32_t> ranks;
  std::vector<int32_t> prev, next;
  std::vector<std::pair<int32_t, int32_t>> heap;  // (rank, position)
  std::string spelling;
};

class BpeModel {
 public:
  // Validates the spec (FormatError naming `file` and the field: duplicate ids or spellings,
  // merges of tokens not in the vocab, a byte-level vocab missing a byte).
  BpeModel(BpeSpec spec, const std::string& file);

  // Appends the ids of one piece (its bytes).
  void encode_piece(std::string_view bytes, BpeScratch& scratch, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_id(std::string_view spelling) const;
  // The vocab spelling of an id, or nullptr when the model has no such id.
  const std::string* spelling(int32_t id) const;
  int32_t id_bound() const { return static_cast<int32_t>(spellings_.size()); }  // max id + 1
  bool byte_level() const { return byte_level_; }
  bool byte_fallback() const { return byte_fallback_; }

 private:
  void build_vocab(std::vector<std::pair<std::string, int32_t>>& vocab, const std::string& file);
  void build_merges(const std::vector<std::pair<std::string, std::string>>& merges,
                    const std::string& file);
  void initial_symbols(std::string_view bytes, BpeScratch& s) const;
  void append_char_symbols(std::string_view ch, std::vector<int32_t>& symbols) const;
  void merge_small(BpeScratch& s) const;
  void merge_large(BpeScratch& s) const;
  int32_t pair_rank(int32_t left, int32_t right) const;

  StringIdMap ids_;
  std::vector<std::string> spellings_;  // by id; empty for ids the vocab does not use
  std::vector<bool> used_;
  MergeTable merges_;
  std::array<int32_t, 256> byte_ids_{};      // byte-level: id of each byte's spelling
  std::array<int32_t, 256> fallback_ids_{};  // byte fallback: id of <0xXX>, -1 when absent
  std::optional<int32_t> unk_id_;
  bool byte_level_;
  bool byte_fallback_;
  bool ignore_merges_;
};

}  // namespace flashdesk
