// Pre-tokenization: splits a text segment into the pieces that BPE encodes one by one, as the
// HF pre-tokenizer Sequence of Split steps (and an optional ByteLevel step) does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/split_patterns.h"
#include "engine/tokenizer/text_units.h"

namespace flashdesk {

// What happens to the matches of a Split pattern (HF SplitDelimiterBehavior).
enum class SplitBehavior : uint8_t {
  kIsolated,            // each match is a piece of its own
  kRemoved,             // matches are dropped
  kMergedWithPrevious,  // a match joins the piece before it (unless that is a match too)
  kMergedWithNext,      // a match joins the piece after it (unless that is a match too)
  kContiguous,          // consecutive matches form one piece
};

struct SplitStep {
  SplitPattern pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
};

struct PreTokenizerSpec {
  std::vector<SplitStep> steps;  // applied in order, each to every piece of the previous one
  bool byte_level = false;       // a ByteLevel step ends the sequence
  // ByteLevel options, applied in HF's order: first the prefix space on each piece that does not
  // start with one, then (byte_level_regex) the GPT-2 split of each piece.
  bool add_prefix_space = false;
  bool byte_level_regex = false;
};

// A piece: bytes [begin, end) of the text pre_tokenize() returned.
struct Piece {
  uint32_t begin;
  uint32_t end;
};

// Working memory reused across calls so that splitting allocates only while it grows.
struct PreTokenizerScratch {
  TextUnits units;
  std::vector<Piece> current, next;  // unit-index ranges while splitting
  std::vector<UnitRange> matches;
  std::string with_spaces;  // the text with prefix spaces added (add_prefix_space)
};

// Splits `segment` into pieces, appended to `out` as byte ranges of the returned text: the
// segment itself, or scratch.with_spaces when prefix spaces were added.
std::string_view pre_tokenize(const PreTokenizerSpec& spec, std::string_view segment,
                              PreTokenizerScratch& scratch, std::vector<Piece>& out);

}  // namespace flashdesk
