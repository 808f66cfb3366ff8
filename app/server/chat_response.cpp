// Formats completions, stream chunks, usage and the model list as JSON (chat_response.h).
#include "app/server/chat_response.h"

#include <nlohmann/json.hpp>

namespace flashdesk::server {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json usage_object(const CompletionUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
          {"prompt_cache_hit_tokens", u.cached_tokens},
          {"prompt_cache_miss_tokens", u.prompt_tokens - u.cached_tokens}};
}

json base(const ResponseHeader& h, const char* object) {
  return {{"id", h.id},
          {"object", object},
          {"created", h.created},
          {"model", h.model},
          {"system_fingerprint", nullptr}};
}

}  // namespace

std::string usage_json(const CompletionUsage& usage) {
  return dump(usage_object(usage));
}

std::string completion_json(const ResponseHeader& header, const Completion& c) {
  json message = {{"role", "assistant"}, {"content", c.content}};
  message["reasoning_content"] = c.thinking ? json(c.reasoning) : json(nullptr);
  json j = base(header, "chat.completion");
  j["choices"] = json::array({{{"index", 0},
                               {"message", message},
                               {"logprobs", nullptr},
                               {"finish_reason", c.finish_reason}}});
  j["usage"] = usage_object(c.usage);
  return dump(j);
}

std::string chunk_json(const ResponseHeader& header, const std::string& delta,
                       const std::optional<std::string>& finish_reason) {
  json j = base(header, "chat.completion.chunk");
  j["choices"] = json::array({{{"index", 0},
                               {"delta", json::parse(delta)},
                               {"logprobs", nullptr},
                               {"finish_reason", finish_reason ? json(*finish_reason) : json()}}});
  return dump(j);
}

std::string usage_chunk_json(const ResponseHeader& header, const CompletionUsage& usage) {
  json j = base(header, "chat.completion.chunk");
  j["choices"] = json::array();
  j["usage"] = usage_object(usage);
  return dump(j);
}

std::string text_delta(StreamChannel channel, std::string_view text) {
  const char* key = channel == StreamChannel::kThinking ? "reasoning_content" : "content";
  return dump(json{{key, std::string(text)}});
}

namespace {

json model_object(const std::string& model_id, int64_t created) {
  return {{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "flashdesk"}};
}

}  // namespace

std::string models_json(const std::string& model_id, int64_t created) {
  return dump({{"object", "list"}, {"data", json::array({model_object(model_id, created)})}});
}

std::string model_json(const std::string& model_id, int64_t created) {
  return dump(model_object(model_id, created));
}

}  // namespace flashdesk::server
