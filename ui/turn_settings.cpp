// Settings to turn options, request checks and stats shared by the ChatService implementations.
#include "ui/turn_settings.h"

#include <fstream>

#include "engine/util/error.h"

namespace flashdesk::ui {

ChatOptions chat_options(const storage::SessionSettings& settings) {
  ChatOptions options;
  options.mode = settings.thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
  options.effort = ReasoningEffort::of(settings.effort);
  return options;
}

TurnOptions turn_options(const storage::SessionSettings& settings, bool speculative) {
  const ChatOptions chat = chat_options(settings);
  TurnOptions options;
  options.mode = chat.mode;
  options.effort = chat.effort;
  options.generation.max_new_tokens = settings.max_new_tokens;
  options.generation.sampling = settings.sampling;
  options.generation.speculative = speculative;
  return options;
}

void check_request(const std::optional<ModelSummary>& model, const TurnRequest& request,
                   ImageSupport images) {
  if (!model) throw InvalidRequest("no model is loaded: open a model folder first");
  if (request.speculative && !model->draft_head)
    throw InvalidRequest("the model '" + model->name +
                         "' has no DSpark draft head: turn speculative decoding off in Settings");
  request.settings.validate();
  if (request.text.empty() && request.images.empty()) throw InvalidRequest("the message is empty");
  for (const auto& image : request.images) {
    if (!std::ifstream(image, std::ios::binary))
      throw IoError(image.string() + ": the image cannot be read");
  }
  if (!request.images.empty() && !model->vision)
    throw InvalidRequest("the model '" + model->name +
                         "' has no image encoder: remove the images to send this message");
  if (!request.images.empty() && images == ImageSupport::refused)
    throw InvalidRequest(
        "images are sent only in stored sessions (this chat service does not encode them): "
        "remove the images to send this message");
}

TurnStats turn_stats(const GenerationStats& g) {
  TurnStats s;
  s.prompt_tokens = g.prompt_tokens;
  s.reused_tokens = g.reused_tokens;
  s.computed_tokens = g.computed_tokens;
  s.generated_tokens = g.generated_tokens;
  s.thinking_tokens = g.thinking_tokens;
  s.thinking_ms = g.thinking_ms;
  s.ttft_ms = g.ttft_ms;
  s.decode_tokens_per_s = g.decode_tokens_per_s();
  s.speculative = g.draft_rounds > 0;
  s.verifies = g.verifies;
  s.mean_accepted = g.mean_accepted();
  return s;
}

ModelSummary summary_of(const ChatEngine& engine, const std::filesystem::path& directory) {
  return ModelSummary{
      .name = engine.name(),
      .fingerprint = engine.fingerprint(),
      .directory = directory,
      .vision = engine.config().vision.has_value(),
      .draft_head = engine.has_draft_head(),
      .max_context = engine.config().text.max_position_embeddings,
      .backend = std::string(engine.backend().name()),
      .remote_url = {},
  };
}

}  // namespace flashdesk::ui
