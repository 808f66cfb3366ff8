// Hand-written matchers for the supported pre-tokenizer regexes (see split_patterns.h).
#include "engine/tokenizer/split_patterns.h"

#include <string>

#include "engine/tokenizer/unicode_class.h"

namespace flashdesk {
namespace {

using namespace unicode;

// The regexes as they appear in tokenizer.json once JSON escapes are undone (CR and LF written
// as \r and \n here; canonical_regex() turns either spelling into the raw characters).
constexpr std::string_view kDigitsRegex = R"(\p{N}{1,3})";
constexpr std::string_view kCjkRegex = "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+";
constexpr std::string_view kDeepSeekRegex =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGpt2Regex =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// Replaces the escapes \r and \n by the characters they stand for; other escapes stay.
std::string canonical_regex(std::string_view re) {
  std::string out;
  for (size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '\\' && i + 1 < re.size()) {
      const char next = re[++i];
      if (next == 'r' || next == 'n') {
        out.push_back(next == 'r' ? '\r' : '\n');
      } else {
        out.push_back('\\');
        out.push_back(next);
      }
    } else {
      out.push_back(re[i]);
    }
  }
  return out;
}

bool is_cr_lf(uint32_t cp) {
  return cp == '\r' || cp == '\n';
}
bool is_ascii_letter(uint32_t cp) {
  return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
}
bool is_ascii_punct(uint32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}
bool is_cjk_kana(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF);
}

// End of the run of units from i (< end) whose flags intersect `mask`.
size_t run_of(const TextUnits& t, size_t i, size_t end, uint8_t mask) {
  while (i < end && (t.flags[i] & mask)) ++i;
  return i;
}

// \s+(?!\S) then \s+, the last two alternatives of both word patterns. Backtracking gives:
// the whole run when it reaches the end of the text, else the run minus its last unit (which
// then starts the next piece, e.g. the space before a word), else a lone space unit.
size_t match_whitespace_tail(const TextUnits& t, size_t i, size_t end) {
  const size_t run = run_of(t, i, end, kSpace);
  if (run == i) return i;
  if (run == end || run - i == 1) return run;
  return run - 1;
}

size_t match_digits(const TextUnits& t, size_t i, size_t end) {
  size_t j = i;
  while (j < end && j - i < 3 && (t.flags[j] & kNumber)) ++j;
  return j;
}

size_t match_cjk(const TextUnits& t, size_t i, size_t end) {
  size_t j = i;
  while (j < end && is_cjk_kana(t.cp[j])) ++j;
  return j;
}

// [!"#...~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ | ?[\p{P}\p{S}]+[\r\n]* |
// \s*[\r\n]+ | \s+(?!\S) | \s+
size_t match_deepseek(const TextUnits& t, size_t i, size_t end) {
  const uint32_t c = t.cp[i];
  const bool has_next = i + 1 < end;
  if (is_ascii_punct(c) && has_next && is_ascii_letter(t.cp[i + 1])) {
    size_t j = i + 1;
    while (j < end && is_ascii_letter(t.cp[j])) ++j;
    return j;
  }
  // The optional prefix unit may itself be a mark; whether the optional part takes it or the
  // run does, the match ends where the letter/mark run ends.
  const bool prefix_ok = !is_cr_lf(c) && !(t.flags[i] & (kLetter | kPunct | kSymbol));
  if (prefix_ok && has_next && (t.flags[i + 1] & (kLetter | kMark)))
    return run_of(t, i + 1, end, kLetter | kMark);
  if (t.flags[i] & (kLetter | kMark)) return run_of(t, i, end, kLetter | kMark);
  const size_t sym = (c == ' ' && has_next) ? i + 1 : i;
  if (t.flags[sym] & (kPunct | kSymbol)) {
    size_t j = run_of(t, sym, end, kPunct | kSymbol);
    while (j < end && is_cr_lf(t.cp[j])) ++j;
    return j;
  }
  // \s*[\r\n]+ : the whitespace run up to and including its last CR/LF.
  const size_t run = run_of(t, i, end, kSpace);
  for (size_t j = run; j > i; --j)
    if (is_cr_lf(t.cp[j - 1])) return j;
  return match_whitespace_tail(t, i, end);
}

// 's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
size_t match_gpt2(const TextUnits& t, size_t i, size_t end) {
  const uint32_t c = t.cp[i];
  if (c == '\'' && i + 1 < end) {
    const uint32_t a = t.cp[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    const uint32_t b = i + 2 < end ? t.cp[i + 2] : 0;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  const size_t k = (c == ' ' && i + 1 < end) ? i + 1 : i;  // after the optional space
  if (t.flags[k] & kLetter) return run_of(t, k, end, kLetter);
  if (t.flags[k] & kNumber) return run_of(t, k, end, kNumber);
  constexpr uint8_t kNotOther = kSpace | kLetter | kNumber;
  if (!(t.flags[k] & kNotOther)) {
    size_t j = k;
    while (j < end && !(t.flags[j] & kNotOther)) ++j;
    return j;
  }
  return match_whitespace_tail(t, i, end);
}

size_t match_literal(const std::vector<uint32_t>& lit, const TextUnits& t, size_t i, size_t end) {
  if (end - i < lit.size()) return i;
  for (size_t k = 0; k < lit.size(); ++k)
    if (t.cp[i + k] != lit[k]) return i;
  return i + lit.size();
}

}  // namespace

std::optional<SplitPattern> recognise_regex(std::string_view regex) {
  const std::string re = canonical_regex(regex);
  if (re == kDigitsRegex) return SplitPattern{SplitPatternKind::kDigitsUpTo3, {}};
  if (re == kCjkRegex) return SplitPattern{SplitPatternKind::kCjkKanaRun, {}};
  if (re == canonical_regex(kDeepSeekRegex))
    return SplitPattern{SplitPatternKind::kDeepSeekWords, {}};
  if (re == canonical_regex(kGpt2Regex)) return gpt2_pattern();
  return std::nullopt;
}

SplitPattern gpt2_pattern() {
  return SplitPattern{SplitPatternKind::kGpt2Words, {}};
}

namespace {

// The search loop, instantiated per pattern so the matcher is inlined (one call per unit was
// the largest cost of pre-tokenization).
template <class Match>
void find_all(Match match, uint32_t begin, uint32_t end, std::vector<UnitRange>& matches) {
  for (uint32_t i = begin; i < end;) {
    const auto m = static_cast<uint32_t>(match(i));
    if (m == i) {
      ++i;
    } else {
      matches.push_back({i, m});
      i = m;
    }
  }
}

}  // namespace

void find_matches(const SplitPattern& pattern, const TextUnits& t, uint32_t begin, uint32_t end,
                  std::vector<UnitRange>& matches) {
  switch (pattern.kind) {
    case SplitPatternKind::kDigitsUpTo3:
      return find_all([&](size_t i) { return match_digits(t, i, end); }, begin, end, matches);
    case SplitPatternKind::kCjkKanaRun:
      return find_all([&](size_t i) { return match_cjk(t, i, end); }, begin, end, matches);
    case SplitPatternKind::kDeepSeekWords:
      return find_all([&](size_t i) { return match_deepseek(t, i, end); }, begin, end, matches);
    case SplitPatternKind::kGpt2Words:
      return find_all([&](size_t i) { return match_gpt2(t, i, end); }, begin, end, matches);
    case SplitPatternKind::kLiteral:
      return find_all([&](size_t i) { return match_literal(pattern.literal, t, i, end); }, begin,
                      end, matches);
  }
}

}  // namespace flashdesk
