// Parses and validates a chat completion request (chat_request.h): the fields, their types and
// ranges, the message list and image data URLs.
#include "app/server/chat_request.h"

#include <set>

#include <nlohmann/json.hpp>

#include "app/server/api_error.h"
#include "storage/base64.h"

namespace flashdesk::server {
namespace {

using nlohmann::json;

// Every top-level field a request may carry; anything else is refused (OpenAI does the same).
const std::set<std::string, std::less<>> kKnownFields = {"model",
                                                         "messages",
                                                         "stream",
                                                         "stream_options",
                                                         "max_tokens",
                                                         "max_completion_tokens",
                                                         "temperature",
                                                         "top_p",
                                                         "seed",
                                                         "ignore_eos",
                                                         "stop",
                                                         "reasoning_effort",
                                                         "thinking",
                                                         "n",
                                                         "user",
                                                         "frequency_penalty",
                                                         "presence_penalty",
                                                         "logprobs",
                                                         "response_format",
                                                         "tools",
                                                         "tool_choice",
                                                         "parallel_tool_calls"};

[[noreturn]] void fail(const std::string& param, const std::string& message) {
  throw ApiError::invalid(message, param);
}

const json* find(const json& object, std::string_view key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

bool read_bool(const json& object, std::string_view key, bool fallback) {
  const json* v = find(object, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(std::string(key), "'" + std::string(key) + "' must be a boolean");
  return v->get<bool>();
}

double read_number(const json& v, const std::string& key, double lo, double hi) {
  if (!v.is_number()) fail(key, "'" + key + "' must be a number");
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    fail(key, "'" + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump());
  return x;
}

int64_t read_integer(const json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) fail(key, "'" + key + "' must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(key, "'" + key + "' must be at most " + std::to_string(hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    fail(key, "'" + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

// Options the engine does not implement are accepted only at their neutral value.
void refuse_unsupported(const json& body) {
  for (const char* key : {"frequency_penalty", "presence_penalty"})
    if (const json* v = find(body, key); v != nullptr && read_number(*v, key, -2, 2) != 0)
      fail(key, std::string("'") + key + "' is not supported (only 0)");
  if (const json* v = find(body, "n"); v != nullptr && read_integer(*v, "n", 1, 128) != 1)
    fail("n", "only n = 1 is supported");
  if (read_bool(body, "logprobs", false)) fail("logprobs", "'logprobs' is not supported");
  for (const char* key : {"tools", "tool_choice", "parallel_tool_calls"})
    if (find(body, key) != nullptr) fail(key, "tools and function calls are not supported");
  if (const json* v = find(body, "response_format")) {
    const json* type = v->is_object() ? find(*v, "type") : nullptr;
    if (type == nullptr || *type != "text")
      fail("response_format", "only response_format {\"type\": \"text\"} is supported");
  }
  if (const json* v = find(body, "user"); v != nullptr && !v->is_string())
    fail("user", "'user' must be a string");
}

// A data URL ("data:image/png;base64,...") or bare base64, decoded to the file's bytes.
std::vector<uint8_t> image_bytes(const std::string& url, const std::string& param) {
  std::string_view payload = url;
  if (payload.starts_with("data:")) {
    const size_t comma = payload.find(',');
    if (comma == std::string_view::npos || !payload.substr(0, comma).ends_with(";base64"))
      fail(param, "an image data URL must be base64: data:image/...;base64,...");
    payload.remove_prefix(comma + 1);
  } else if (payload.starts_with("http://") || payload.starts_with("https://")) {
    fail(param, "images by http(s) URL are not fetched; send a base64 data URL");
  }
  auto bytes = storage::base64_decode(payload);
  if (!bytes || bytes->empty()) fail(param, "the image is not valid base64");
  return std::move(*bytes);
}

// A message's content: a string, or an array of text and image_url parts.
void read_content(const json& content, const std::string& param, bool images_allowed,
                  RequestMessage& out) {
  if (content.is_string()) {
    out.text = content.get<std::string>();
    return;
  }
  if (!content.is_array()) fail(param, "'content' must be a string or an array of parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string where = param + "[" + std::to_string(i) + "]";
    const json* type = part.is_object() ? find(part, "type") : nullptr;
    if (type == nullptr || !type->is_string()) fail(where, "a content part needs a 'type'");
    if (*type == "text") {
      const json* t = find(part, "text");
      if (t == nullptr || !t->is_string()) fail(where + ".text", "a text part needs 'text'");
      text += (text.empty() ? "" : "\n\n") + t->get<std::string>();
    } else if (*type == "image_url") {
      if (!images_allowed) fail(where, "images are allowed only in user messages");
      const json* image = find(part, "image_url");
      const json* url = image == nullptr     ? nullptr
                        : image->is_string() ? image
                        : image->is_object() ? find(*image, "url")
                                             : nullptr;
      if (url == nullptr || !url->is_string())
        fail(where + ".image_url", "an image_url part needs 'image_url': {\"url\": ...}");
      out.images.push_back({image_bytes(url->get<std::string>(), where + ".image_url"), where});
    } else {
      fail(where + ".type", "unsupported content part type '" + type->get<std::string>() + "'");
    }
  }
  out.text = std::move(text);
}

// System (and developer) messages only lead the conversation: the format states one system prompt.
void read_messages(const json& body, ChatRequest& request) {
  const json* messages = find(body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty())
    fail("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json* role = m.is_object() ? find(m, "role") : nullptr;
    if (role == nullptr || !role->is_string()) fail(where + ".role", "a message needs a 'role'");
    const json* content = find(m, "content");
    if (find(m, "tool_calls") != nullptr)
      fail(where + ".tool_calls", "tools and function calls are not supported");
    RequestMessage message;
    const std::string r = role->get<std::string>();
    if (content == nullptr) fail(where + ".content", "a message needs 'content'");
    if (r == "system" || r == "developer") {
      if (!request.messages.empty())
        fail(where + ".role", "system messages are supported only before the first user message");
      read_content(*content, where + ".content", false, message);
      request.system_prompt += (request.system_prompt.empty() ? "" : "\n\n") + message.text;
      continue;
    }
    if (r == "user") {
      message.role = Role::kUser;
    } else if (r == "assistant") {
      message.role = Role::kAssistant;  // its reasoning_content, if sent back, is not rendered
    } else {
      fail(where + ".role", "unsupported role '" + r + "' (system, user or assistant)");
    }
    read_content(*content, where + ".content", message.role == Role::kUser, message);
    request.messages.push_back(std::move(message));
  }
  if (request.messages.empty() || request.messages.back().role != Role::kUser)
    fail("messages", "the last message must be a user message");
}

// reasoning_effort: "low" 50, "medium" and "high" 75 (the app's default; it has no medium
// preset), "max" 100, or an integer 1-100 (a FlashDesk extension); "none" turns thinking off.
void read_reasoning(const json& body, TurnOptions& turn) {
  if (const json* t = find(body, "thinking")) {
    const json* type = t->is_object() ? find(*t, "type") : nullptr;
    if (type == nullptr || (*type != "enabled" && *type != "disabled"))
      fail("thinking", "'thinking' must be {\"type\": \"enabled\"} or {\"type\": \"disabled\"}");
    turn.mode = *type == "enabled" ? ThinkingMode::kThinking : ThinkingMode::kChat;
  }
  const json* v = find(body, "reasoning_effort");
  if (v == nullptr) return;
  if (v->is_number()) {
    turn.effort =
        ReasoningEffort::of(static_cast<int>(read_integer(*v, "reasoning_effort", 1, 100)));
    return;
  }
  if (!v->is_string()) fail("reasoning_effort", "'reasoning_effort' must be a string or 1-100");
  const std::string s = v->get<std::string>();
  if (s == "none") {
    turn.mode = ThinkingMode::kChat;
  } else if (s == "low") {
    turn.effort = ReasoningEffort::of(ReasoningEffort::kLow);
  } else if (s == "medium" || s == "high") {
    turn.effort = ReasoningEffort::of(ReasoningEffort::kHigh);
  } else if (s == "max") {
    turn.effort = ReasoningEffort::of(ReasoningEffort::kMax);
  } else {
    fail("reasoning_effort", "'reasoning_effort' must be none, low, medium, high, max or 1-100");
  }
}

void read_sampling(const json& body, TurnOptions& turn) {
  GenerationOptions& g = turn.generation;
  g.max_new_tokens = kDefaultMaxTokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (const json* v = find(body, key)) g.max_new_tokens = read_integer(*v, key, 1, 1 << 24);
  if (const json* v = find(body, "temperature"))
    g.sampling.temperature = static_cast<float>(read_number(*v, "temperature", 0, 2));
  if (const json* v = find(body, "top_p")) {
    g.sampling.top_p = static_cast<float>(read_number(*v, "top_p", 0, 1));
    if (g.sampling.top_p <= 0) fail("top_p", "'top_p' must be greater than 0");
  }
  if (const json* v = find(body, "seed"))
    g.sampling.seed = static_cast<uint64_t>(read_integer(*v, "seed", 0, INT64_MAX));
  g.ignore_eos = read_bool(body, "ignore_eos", false);  // vLLM's and SGLang's extension
}

std::vector<std::string> read_stop(const json& body) {
  const json* v = find(body, "stop");
  if (v == nullptr) return {};
  std::vector<std::string> stop;
  if (v->is_string()) {
    stop.push_back(v->get<std::string>());
  } else if (v->is_array() && v->size() <= kMaxStopSequences) {
    for (const json& s : *v) {
      if (!s.is_string()) fail("stop", "'stop' must be a string or an array of strings");
      stop.push_back(s.get<std::string>());
    }
  } else {
    fail("stop", "'stop' must be a string or an array of at most 4 strings");
  }
  for (const std::string& s : stop)
    if (s.empty()) fail("stop", "stop sequences must not be empty");
  return stop;
}

}  // namespace

ChatRequest parse_chat_request(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded())
    throw ApiError::invalid("the request body is not valid JSON", std::nullopt, "invalid_json");
  if (!j.is_object()) throw ApiError::invalid("the request body must be a JSON object");
  for (const auto& [key, value] : j.items())
    if (!kKnownFields.contains(key)) fail(key, "Unrecognized request argument supplied: " + key);
  ChatRequest request;
  const json* model = find(j, "model");
  if (model == nullptr || !model->is_string()) fail("model", "'model' must be a string");
  request.model = model->get<std::string>();
  refuse_unsupported(j);
  read_messages(j, request);
  request.stream = read_bool(j, "stream", false);
  if (const json* o = find(j, "stream_options")) {
    if (!o->is_object()) fail("stream_options", "'stream_options' must be an object");
    if (!request.stream) fail("stream_options", "'stream_options' needs stream: true");
    request.include_usage = read_bool(*o, "include_usage", false);
  }
  read_reasoning(j, request.turn);
  read_sampling(j, request.turn);
  request.stop = read_stop(j);
  return request;
}

}  // namespace flashdesk::server
