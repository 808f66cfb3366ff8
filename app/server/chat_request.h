// The body of POST /v1/chat/completions, parsed and validated: the only reader of a client's
// request JSON.
//
// Goals: accept what the OpenAI and DeepSeek chat APIs send for plain chat (system, user and
// assistant messages; text and image_url parts; sampling, length, stop and reasoning options;
// streaming), and refuse everything else with an ApiError naming the field, so a client never
// gets a silently different answer. Non-goals: tools and function calls, n > 1, logprobs,
// penalties, response formats other than text, images by http(s) URL (the server reads no
// network).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/chat_engine.h"

namespace flashdesk::server {

// Largest max_tokens when the request gives none.
inline constexpr int64_t kDefaultMaxTokens = 2048;
// Most stop sequences, as OpenAI allows.
inline constexpr size_t kMaxStopSequences = 4;

struct RequestImage {
  std::vector<uint8_t> bytes;  // the encoded file (PNG, JPEG, ...), decoded from base64
  std::string label;           // where it was, e.g. "messages[1].content[0]", for errors
};

struct RequestMessage {
  Role role = Role::kUser;  // kUser or kAssistant (system messages go to system_prompt)
  std::string text;
  std::vector<RequestImage> images;  // user messages: placed before the text
};

struct ChatRequest {
  std::string model;
  std::string system_prompt;             // the leading system messages, joined by a blank line
  std::vector<RequestMessage> messages;  // the last one is the user message to answer
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  TurnOptions turn;               // thinking mode, effort, max tokens, sampling
  std::vector<std::string> stop;  // stop sequences of the answer's text
};

// Throws ApiError (400) for JSON that is not a valid request.
ChatRequest parse_chat_request(std::string_view body);

}  // namespace flashdesk::server
