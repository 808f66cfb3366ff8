// A conversation with a model served elsewhere over the OpenAI-compatible API (vLLM, SGLang, or
// another FlashDesk's `serve`): `flashdesk-cli generate|chat --remote URL`.
//
// Goals: the same turn options as a local model (thinking, effort, sampling, max tokens, images)
// sent as chat completion fields, the answer streamed on the same thinking and answer channels,
// usage read back into GenerationStats (cached tokens as reused). Non-goals: KV persistence (the
// server owns its cache), stored sessions (not yet), tool calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/chat_engine.h"

namespace flashdesk::remote {

struct RemoteOptions {
  std::string url;      // the API base, e.g. http://127.0.0.1:8080/v1
  std::string api_key;  // sent as Authorization: Bearer (empty: none)
  std::string model;    // empty: the first model /models lists
};

// An image as it is sent: the file's bytes and its MIME type (a data URL).
struct RemoteImage {
  std::vector<uint8_t> bytes;
  std::string mime_type;  // e.g. image/png
};

// A message of the conversation: the user's (text after its images) or an answer (its text: the
// format drops earlier answers' reasoning).
struct RemoteMessage {
  Role role = Role::kUser;
  std::string text;
  std::vector<RemoteImage> images;
};

// The model ids `/models` lists, in its order. IoError when the server cannot be reached,
// InvalidRequest for a bad URL, an error the server returns or a list that is not one.
std::vector<std::string> list_models(const RemoteOptions& options);
// The bytes of an image file with the MIME type its extension names (PNG when unknown).
RemoteImage read_image(const std::filesystem::path& file);

class RemoteChat {
 public:
  // Resolves the model when none is given. IoError when the server cannot be reached,
  // InvalidRequest for a bad URL or an error the server returns.
  explicit RemoteChat(RemoteOptions options);
  ~RemoteChat();

  const std::string& model() const { return options_.model; }
  void set_system_prompt(std::string text) { system_prompt_ = std::move(text); }

  // Sends the conversation with a new user message (text after the image files), streams the
  // answer, and keeps both for the next turn. `stop` set by another thread ends the answer.
  GenerationResult send(const std::string& text, const std::vector<std::filesystem::path>& images,
                        const TurnOptions& options, const StreamCallbacks& callbacks,
                        const std::atomic<bool>* stop = nullptr);
  GenerationResult send(const RemoteMessage& user, const TurnOptions& options,
                        const StreamCallbacks& callbacks, const std::atomic<bool>* stop = nullptr);
  void reset() { messages_.clear(); }
  // Replaces the conversation (a stored session reopened): the messages before the next turn.
  void set_history(const std::vector<RemoteMessage>& messages);

 private:
  struct Connection;
  std::string request_body(const TurnOptions& options) const;

  RemoteOptions options_;
  std::unique_ptr<Connection> connection_;
  std::string system_prompt_;
  std::vector<std::string> messages_;  // each a JSON message object, user and assistant in turn
};

}  // namespace flashdesk::remote
