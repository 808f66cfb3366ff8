// The split driver shared by every pattern, and the delimiter behaviours (see pre_tokenizer.h).
#include "engine/tokenizer/pre_tokenizer.h"

#include <span>

namespace flashdesk {
namespace {

// Collects a piece's parts (gaps and matches, in order) and applies the delimiter behaviour.
class PartSink {
 public:
  PartSink(SplitBehavior behavior, std::vector<Piece>& out) : behavior_(behavior), out_(out) {}

  void add(uint32_t begin, uint32_t end, bool is_match) {
    if (begin == end) return;
    switch (behavior_) {
      case SplitBehavior::kIsolated:
        push(begin, end);
        break;
      case SplitBehavior::kRemoved:
        if (!is_match) push(begin, end);
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (is_match && have_last_ && !last_was_match_) {
          out_.back().end = end;
        } else {
          push(begin, end);
        }
        break;
      case SplitBehavior::kMergedWithNext:
        if (!is_match && have_last_ && last_was_match_) {
          out_.back().end = end;
        } else {
          push(begin, end);
        }
        break;
      case SplitBehavior::kContiguous:
        if (is_match && have_last_ && last_was_match_) {
          out_.back().end = end;
        } else {
          push(begin, end);
        }
        break;
    }
    last_was_match_ = is_match;
  }

 private:
  void push(uint32_t begin, uint32_t end) {
    out_.push_back({begin, end});
    have_last_ = true;
  }

  SplitBehavior behavior_;
  std::vector<Piece>& out_;
  bool have_last_ = false;
  bool last_was_match_ = false;
};

// Splits the unit range of one piece by `step`, appending the resulting unit ranges.
void split_piece(const SplitStep& step, PreTokenizerScratch& scratch, const Piece& piece,
                 std::vector<Piece>& out) {
  scratch.matches.clear();
  find_matches(step.pattern, scratch.units, piece.begin, piece.end, scratch.matches);
  PartSink sink(step.behavior, out);
  uint32_t gap = piece.begin;
  for (const UnitRange& m : scratch.matches) {
    sink.add(gap, m.begin, false);
    sink.add(m.begin, m.end, true);
    gap = m.end;
  }
  sink.add(gap, piece.end, false);
}

void run_steps(std::span<const SplitStep> steps, PreTokenizerScratch& scratch) {
  for (const SplitStep& step : steps) {
    scratch.next.clear();
    for (const Piece& piece : scratch.current) split_piece(step, scratch, piece, scratch.next);
    scratch.current.swap(scratch.next);
  }
}

// Rewrites the text with a space before every piece that does not start with one; the pieces
// then cover the new text (as unit ranges of it).
void add_prefix_spaces(std::string_view text, PreTokenizerScratch& scratch) {
  std::string& out = scratch.with_spaces;
  out.clear();
  std::vector<Piece>& byte_ranges = scratch.next;
  byte_ranges.clear();
  for (const Piece& piece : scratch.current) {
    const uint32_t begin = scratch.units.offset[piece.begin], end = scratch.units.offset[piece.end];
    const auto start = static_cast<uint32_t>(out.size());
    if (text[begin] != ' ') out.push_back(' ');
    out.append(text.substr(begin, end - begin));
    byte_ranges.push_back({start, static_cast<uint32_t>(out.size())});
  }
  scratch.units.assign(out);
  scratch.current.clear();
  uint32_t unit = 0;
  for (const Piece& range : byte_ranges) {  // piece boundaries stay unit boundaries
    while (scratch.units.offset[unit] < range.begin) ++unit;
    const uint32_t first = unit;
    while (scratch.units.offset[unit] < range.end) ++unit;
    scratch.current.push_back({first, unit});
  }
}

}  // namespace

std::string_view pre_tokenize(const PreTokenizerSpec& spec, std::string_view segment,
                              PreTokenizerScratch& scratch, std::vector<Piece>& out) {
  if (segment.empty()) return segment;
  scratch.units.assign(segment);
  scratch.current.assign(1, Piece{0, static_cast<uint32_t>(scratch.units.size())});
  run_steps(spec.steps, scratch);
  std::string_view text = segment;
  if (spec.byte_level && spec.add_prefix_space && !scratch.current.empty()) {
    add_prefix_spaces(segment, scratch);
    text = scratch.with_spaces;
  }
  if (spec.byte_level_regex) {
    const SplitStep gpt2{gpt2_pattern(), SplitBehavior::kIsolated};
    run_steps(std::span(&gpt2, 1), scratch);
  }
  for (const Piece& piece : scratch.current)
    out.push_back({scratch.units.offset[piece.begin], scratch.units.offset[piece.end]});
  return text;
}

}  // namespace flashdesk
