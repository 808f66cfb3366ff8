// The speculative decoding setting's words and its automatic rule.
#include "engine/runtime/speculative_choice.h"

#include "engine/runtime/chat_engine.h"

namespace flashdesk {

std::optional<SpeculativeChoice> parse_speculative_choice(std::string_view word) {
  if (word == "auto") return SpeculativeChoice::kAuto;
  if (word == "dspark") return SpeculativeChoice::kOn;
  if (word == "off") return SpeculativeChoice::kOff;
  return std::nullopt;
}

std::string_view speculative_choice_name(SpeculativeChoice choice) {
  switch (choice) {
    case SpeculativeChoice::kAuto:
      return "auto";
    case SpeculativeChoice::kOn:
      return "dspark";
    case SpeculativeChoice::kOff:
      return "off";
  }
  return "auto";
}

bool speculative_enabled(SpeculativeChoice choice, bool has_draft_head, std::string_view backend) {
  switch (choice) {
    case SpeculativeChoice::kOn:
      return true;
    case SpeculativeChoice::kOff:
      return false;
    case SpeculativeChoice::kAuto:
      // A name, not cuda_index: a bad "cuda:" name never got this far (make_backend refused it).
      return has_draft_head && (backend == "cuda" || backend.starts_with("cuda:"));
  }
  return false;
}

bool speculative_enabled(SpeculativeChoice choice, const ChatEngine& engine) {
  return speculative_enabled(choice, engine.has_draft_head(), engine.backend().name());
}

}  // namespace flashdesk
