// The speculative decoding setting that the CLI (--speculative) and the app (Settings) share, and
// the one rule that turns it into GenerationOptions::speculative for a loaded model.
//
// Goals: Automatic decodes with the DSpark head where it was measured to pay: a model with a draft
// head on a GPU backend (1.83x on an H200 with flash-tiny's head), not on the CPU backends
// (0.87-0.96x, docs/dspark.md "Default"). Non-goals: measuring the speed-up at run time.
#pragma once

#include <optional>
#include <string_view>

namespace flashdesk {

class ChatEngine;

enum class SpeculativeChoice {
  kAuto,  // on when the model has a draft head and runs on a GPU backend, else off
  kOn,    // always (InvalidRequest from the generator for a model without a head)
  kOff,
};

// "auto", "dspark" (kOn) or "off", the CLI's words; nullopt for anything else.
std::optional<SpeculativeChoice> parse_speculative_choice(std::string_view word);
std::string_view speculative_choice_name(SpeculativeChoice choice);

// Whether turns decode speculatively: kOn and kOff as they say; kAuto when `has_draft_head` and
// `backend` is a GPU backend's name ("cuda", "cuda:N").
bool speculative_enabled(SpeculativeChoice choice, bool has_draft_head, std::string_view backend);
// The same for a loaded engine (ChatEngine::has_draft_head, its backend's name).
bool speculative_enabled(SpeculativeChoice choice, const ChatEngine& engine);

}  // namespace flashdesk
