// Reasoning effort parsing and its prompt line (see reasoning_effort.h).
#include "engine/tokenizer/reasoning_effort.h"

#include <charconv>

#include "engine/util/error.h"

namespace flashdesk {

ReasoningEffort ReasoningEffort::of(int value) {
  if (value < 1 || value > 100)
    throw InvalidRequest("reasoning effort " + std::to_string(value) + " is outside 1-100");
  return ReasoningEffort(value);
}

ReasoningEffort ReasoningEffort::parse(std::string_view text) {
  if (text == "low") return ReasoningEffort(kLow);
  if (text == "high") return ReasoningEffort(kHigh);
  if (text == "max") return ReasoningEffort(kMax);
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw InvalidRequest("reasoning effort \"" + std::string(text) +
                         "\" is not low, high, max or an integer 1-100");
  return of(value);
}

std::string reasoning_effort_line(ReasoningEffort effort) {
  return "Reasoning Effort: " + std::to_string(effort.value()) +
         " (range 1-100, the higher the value, the more thorough the reasoning)";
}

}  // namespace flashdesk
