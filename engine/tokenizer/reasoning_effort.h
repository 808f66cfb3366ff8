// Reasoning effort of V4.1's thinking mode: an integer 1-100 stated in the prompt.
#pragma once

#include <string>
#include <string_view>

namespace flashdesk {

class ReasoningEffort {
 public:
  // Presets of the official V4.1 encoder (docs/model-spec.md §9.3, §12; vLLM's adaptation uses
  // other numbers).
  static constexpr int kLow = 50;
  static constexpr int kHigh = 75;
  static constexpr int kMax = 100;
  static constexpr int kDefault = kHigh;

  ReasoningEffort() = default;
  // InvalidRequest outside 1..100.
  static ReasoningEffort of(int value);
  // "low", "high", "max" or a decimal integer 1..100; anything else is an InvalidRequest.
  static ReasoningEffort parse(std::string_view text);

  int value() const { return value_; }
  bool operator==(const ReasoningEffort&) const = default;

 private:
  explicit ReasoningEffort(int value) : value_(value) {}
  int value_ = kDefault;
};

// The line the model was trained on, e.g. "Reasoning Effort: 75 (range 1-100, the higher the
// value, the more thorough the reasoning)", without the blank line that follows it. The only
// place this text is spelled.
std::string reasoning_effort_line(ReasoningEffort effort);

}  // namespace flashdesk
