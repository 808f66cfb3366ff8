// What both ChatService implementations share: stored session settings to engine turn options,
// the checks a request passes before anything is stored, and engine stats to the app's TurnStats.
#pragma once

#include <optional>

#include "engine/runtime/chat_engine.h"
#include "ui/chat_service.h"

namespace flashdesk::ui {

ChatOptions chat_options(const storage::SessionSettings& settings);
// `speculative`: DSpark speculative decoding (the app setting; the model must have a draft head).
TurnOptions turn_options(const storage::SessionSettings& settings, bool speculative = false);
// Whether a service can put a request's images into the prompt.
enum class ImageSupport { refused, encoded };
// Throws InvalidRequest / IoError naming the problem (no model, empty message, images the model
// or the service cannot take, an unreadable image file).
void check_request(const std::optional<ModelSummary>& model, const TurnRequest& request,
                   ImageSupport images = ImageSupport::refused);
// The counts every turn has; the SSD restore fields are the persistent service's to fill.
TurnStats turn_stats(const GenerationStats& g);
ModelSummary summary_of(const ChatEngine& engine, const std::filesystem::path& directory);

}  // namespace flashdesk::ui
