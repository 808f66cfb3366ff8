// The JSON the server answers with, shaped as OpenAI's chat API with DeepSeek's additions:
// reasoning_content beside content, and the prompt cache split in usage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "app/server/completion_service.h"

namespace flashdesk::server {

// What every object of one answer shares.
struct ResponseHeader {
  std::string id;       // "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// usage: prompt/completion/total tokens, prompt_tokens_details.cached_tokens,
// completion_tokens_details.reasoning_tokens, prompt_cache_hit_tokens and
// prompt_cache_miss_tokens (DeepSeek).
std::string usage_json(const CompletionUsage& usage);

// A whole (non-streamed) chat.completion object.
std::string completion_json(const ResponseHeader& header, const Completion& completion);

// One chat.completion.chunk of a stream. `delta` is a JSON object's text (e.g.
// {"content":"..."}); `finish_reason` ends the choice; `usage` (a JSON object's text) makes the
// usage-only chunk with no choices that stream_options.include_usage asks for.
std::string chunk_json(const ResponseHeader& header, const std::string& delta,
                       const std::optional<std::string>& finish_reason = std::nullopt);
std::string usage_chunk_json(const ResponseHeader& header, const CompletionUsage& usage);

// The delta of streamed text: {"reasoning_content": text} or {"content": text}.
std::string text_delta(StreamChannel channel, std::string_view text);

// GET /v1/models: the one model served.
std::string models_json(const std::string& model_id, int64_t created);
// GET /v1/models/{id}: that model's object alone.
std::string model_json(const std::string& model_id, int64_t created);

}  // namespace flashdesk::server
