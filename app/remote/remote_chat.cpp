// The chat completion client of `--remote`: the request from the turn options, the streamed
// answer read back into a GenerationResult (remote_chat.h).
#include "app/remote/remote_chat.h"

#include <chrono>
#include <fstream>
#include <iterator>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "app/remote/sse_reader.h"
#include "engine/util/error.h"
#include "storage/base64.h"

namespace flashdesk::remote {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// "http://host:port/v1" -> ("http://host:port", "/v1").
std::pair<std::string, std::string> split_url(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos ||
      (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0))
    throw InvalidRequest("the remote address must be an http:// or https:// URL, not '" + url +
                         "'");
  const size_t path = url.find('/', scheme + 3);
  std::string prefix = path == std::string::npos ? "" : url.substr(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return {url.substr(0, path), prefix};
}

std::string mime_type(const std::filesystem::path& file) {
  std::string ext = file.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".jpg" || ext == ".jpeg") return "image/jpeg";
  if (ext == ".gif") return "image/gif";
  if (ext == ".bmp") return "image/bmp";
  if (ext == ".webp") return "image/webp";
  return "image/png";
}

json image_part(const RemoteImage& image) {
  return {
      {"type", "image_url"},
      {"image_url",
       {{"url", "data:" + image.mime_type + ";base64," + storage::base64_encode(image.bytes)}}}};
}

json message_json(const RemoteMessage& m) {
  if (m.role == Role::kAssistant) return {{"role", "assistant"}, {"content", m.text}};
  json content = json::array();
  for (const RemoteImage& image : m.images) content.push_back(image_part(image));
  content.push_back({{"type", "text"}, {"text", m.text}});
  return {{"role", "user"}, {"content", content}};
}

// The message of an error response, or the body itself when it is not an error object.
std::string error_message(int status, const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string())
    return j["error"]["message"].get<std::string>() + " (HTTP " + std::to_string(status) + ")";
  return "HTTP " + std::to_string(status) + (body.empty() ? "" : ": " + body.substr(0, 300));
}

// The effort as the OpenAI field: a preset by name (what vLLM and SGLang accept), else the
// number (a FlashDesk extension).
json effort_field(ReasoningEffort effort) {
  switch (effort.value()) {
    case ReasoningEffort::kLow:
      return "low";
    case ReasoningEffort::kHigh:
      return "high";
    case ReasoningEffort::kMax:
      return "max";
    default:
      return effort.value();
  }
}

}  // namespace

RemoteImage read_image(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError("cannot read image " + file.string());
  return {{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()}, mime_type(file)};
}

std::vector<std::string> list_models(const RemoteOptions& options) {
  auto [base, prefix] = split_url(options.url);
  httplib::Client c(base);
  c.set_connection_timeout(10);
  c.set_read_timeout(30);
  if (!options.api_key.empty()) c.set_bearer_token_auth(options.api_key);
  const auto r = c.Get(prefix + "/models");
  if (!r) throw IoError("cannot reach " + options.url + ": " + httplib::to_string(r.error()));
  if (r->status != 200) throw InvalidRequest("remote server: " + error_message(r->status, r->body));
  const json j = json::parse(r->body, nullptr, false);
  std::vector<std::string> ids;
  if (j.is_object() && j.contains("data") && j["data"].is_array())
    for (const json& model : j["data"])
      if (model.is_object() && model.contains("id") && model["id"].is_string())
        ids.push_back(model["id"].get<std::string>());
  if (ids.empty()) throw InvalidRequest("remote server: " + options.url + "/models lists no model");
  return ids;
}

struct RemoteChat::Connection {
  httplib::Client client;
  std::string prefix;
  Connection(const std::string& base, std::string p) : client(base), prefix(std::move(p)) {}
};

RemoteChat::RemoteChat(RemoteOptions options) : options_(std::move(options)) {
  auto [base, prefix] = split_url(options_.url);
  connection_ = std::make_unique<Connection>(base, prefix);
  httplib::Client& c = connection_->client;
  c.set_connection_timeout(10);
  c.set_read_timeout(3600);  // a long prompt's prefill sends nothing for a while
  if (!options_.api_key.empty()) c.set_bearer_token_auth(options_.api_key);
  if (options_.model.empty()) options_.model = list_models(options_).front();
}

RemoteChat::~RemoteChat() = default;

std::string RemoteChat::request_body(const TurnOptions& o) const {
  json messages = json::array();
  if (!system_prompt_.empty())
    messages.push_back({{"role", "system"}, {"content", system_prompt_}});
  for (const std::string& m : messages_) messages.push_back(json::parse(m));
  const bool thinking = o.mode == ThinkingMode::kThinking;
  const SamplingParams& s = o.generation.sampling;
  json body = {{"model", options_.model},
               {"messages", messages},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"max_tokens", o.generation.max_new_tokens},
               {"temperature", s.temperature},
               {"top_p", s.top_p},
               {"seed", s.seed},
               {"thinking", {{"type", thinking ? "enabled" : "disabled"}}}};
  if (thinking) body["reasoning_effort"] = effort_field(o.effort);
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// Reads the chunks of one streamed answer into a GenerationResult, passing its text on.
class AnswerReader {
 public:
  explicit AnswerReader(const StreamCallbacks& callbacks) : callbacks_(callbacks) {}

  void event(const std::string& data) {
    if (data == "[DONE]") return;
    const json chunk = json::parse(data, nullptr, false);
    if (!chunk.is_object()) return;
    if (chunk.contains("error")) failure_ = error_message(200, data);
    if (chunk.contains("usage") && chunk["usage"].is_object()) usage(chunk["usage"]);
    if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty())
      return;
    const json& choice = chunk["choices"][0];
    if (choice.contains("delta") && choice["delta"].is_object()) delta(choice["delta"]);
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      result_.finish =
          choice["finish_reason"] == "length" ? FinishReason::kLength : FinishReason::kEos;
  }

  // The error event a stream ended with (empty: none).
  const std::string& failure() const { return failure_; }
  // The answer, its stats completed (`stopped`: ended by the caller).
  GenerationResult finish(bool stopped) {
    GenerationStats& s = result_.stats;
    if (stopped) result_.finish = FinishReason::kStopped;
    s.computed_tokens = s.prompt_tokens - s.reused_tokens;
    s.reused_ram_tokens = s.reused_tokens;
    if (first_token_ != Clock::time_point{}) s.decode_ms = ms_since(first_token_);
    return std::move(result_);
  }

 private:
  static int64_t count(const json& object, const char* group, const char* key) {
    const json& g = group ? object.value(group, json::object()) : object;
    return g.is_object() ? g.value(key, int64_t{0}) : 0;
  }

  void usage(const json& u) {
    GenerationStats& s = result_.stats;
    s.prompt_tokens = count(u, nullptr, "prompt_tokens");
    s.generated_tokens = count(u, nullptr, "completion_tokens");
    s.reused_tokens = count(u, "prompt_tokens_details", "cached_tokens");
    s.thinking_tokens = count(u, "completion_tokens_details", "reasoning_tokens");
  }

  void delta(const json& d) {
    for (const auto& [key, channel] : {std::pair{"reasoning_content", StreamChannel::kThinking},
                                       std::pair{"content", StreamChannel::kAnswer}}) {
      if (!d.contains(key) || !d[key].is_string() || d[key].get_ref<const std::string&>().empty())
        continue;
      const std::string& piece = d[key].get_ref<const std::string&>();
      if (first_token_ == Clock::time_point{}) {
        first_token_ = Clock::now();
        result_.stats.ttft_ms = ms_since(start_);
      }
      (channel == StreamChannel::kThinking ? result_.reasoning : result_.content) += piece;
      if (callbacks_.on_text) callbacks_.on_text(channel, piece);
    }
  }

  const StreamCallbacks& callbacks_;
  GenerationResult result_;
  std::string failure_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point first_token_{};
};

}  // namespace

void RemoteChat::set_history(const std::vector<RemoteMessage>& messages) {
  messages_.clear();
  for (const RemoteMessage& m : messages) messages_.push_back(message_json(m).dump());
}

GenerationResult RemoteChat::send(const std::string& text,
                                  const std::vector<std::filesystem::path>& images,
                                  const TurnOptions& options, const StreamCallbacks& callbacks,
                                  const std::atomic<bool>* stop) {
  RemoteMessage user{.role = Role::kUser, .text = text, .images = {}};
  for (const auto& file : images) user.images.push_back(read_image(file));
  return send(user, options, callbacks, stop);
}

GenerationResult RemoteChat::send(const RemoteMessage& user, const TurnOptions& options,
                                  const StreamCallbacks& callbacks, const std::atomic<bool>* stop) {
  messages_.push_back(message_json(user).dump());
  AnswerReader answer(callbacks);
  SseReader sse;
  int status = 0;
  std::string refusal;  // the body of a response other than 200
  const auto stopped = [stop] { return stop != nullptr && stop->load(); };

  httplib::Request req;
  req.method = "POST";
  req.path = connection_->prefix + "/chat/completions";
  req.body = request_body(options);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (status != 200) return refusal.append(data, size), true;
    for (const std::string& event : sse.feed(std::string_view(data, size))) answer.event(event);
    return !stopped();  // false closes the connection, which stops a FlashDesk server
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = connection_->client.send(req, res, error);
  if (!sent && !(stopped() && error == httplib::Error::Canceled)) {
    messages_.pop_back();
    throw IoError("cannot reach " + options_.url + ": " + httplib::to_string(error));
  }
  if (status != 200 || !answer.failure().empty()) {
    messages_.pop_back();
    throw InvalidRequest("remote server: " + (answer.failure().empty()
                                                  ? error_message(status, refusal)
                                                  : answer.failure()));
  }
  GenerationResult result = answer.finish(stopped());
  messages_.push_back(json{{"role", "assistant"}, {"content", result.content}}.dump());
  return result;
}

}  // namespace flashdesk::remote
