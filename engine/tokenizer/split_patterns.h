// The pre-tokenizer regexes we support, each as a hand-written matcher over TextUnits.
//
// tokenizer.json files carry Oniguruma regexes; rather than embed a regex engine we recognise
// the patterns DeepSeek (and GPT-2 byte-level BPE) use and match them with code that follows the
// regex's leftmost-first backtracking semantics exactly. An unknown pattern is a FormatError at
// load time, never a silent approximation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/tokenizer/text_units.h"

namespace flashdesk {

enum class SplitPatternKind : uint8_t {
  kDigitsUpTo3,    // \p{N}{1,3}
  kCjkKanaRun,     // [一-龥぀-ゟ゠-ヿ]+  (U+4E00-9FA5, U+3040-309F, U+30A0-30FF)
  kDeepSeekWords,  // DeepSeek-V3's word / punctuation / whitespace alternation
  kGpt2Words,      // the GPT-2 pattern ByteLevel applies when use_regex is true
  kLiteral,        // a {"String": ...} pattern: the literal text
};

struct SplitPattern {
  SplitPatternKind kind;
  std::vector<uint32_t> literal;  // code points of a kLiteral pattern (non-empty)
};

// The pattern for a {"Regex": ...} value, or nullopt when it is not one we implement.
// `\r` and `\n` escapes and the literal characters are treated alike.
std::optional<SplitPattern> recognise_regex(std::string_view regex);

// The GPT-2 pattern of the ByteLevel pre-tokenizer.
SplitPattern gpt2_pattern();

// A range [begin, end) of units.
struct UnitRange {
  uint32_t begin;
  uint32_t end;
};

// Appends the successive leftmost matches of `pattern` in units [begin, end) to `matches`, as a
// regex engine's find-all does: after a match the search resumes where it ended, after a
// failure one unit later. No supported pattern matches the empty string.
void find_matches(const SplitPattern& pattern, const TextUnits& text, uint32_t begin, uint32_t end,
                  std::vector<UnitRange>& matches);

}  // namespace flashdesk
