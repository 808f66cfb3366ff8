// The remote ChatService: the endpoint checked at connect, stored sessions turned into the
// messages resent each turn, answers streamed back with their thinking time.
#include "ui/remote_chat_service.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>

#include "storage/session_images.h"
#include "ui/turn_settings.h"

namespace flashdesk::ui {

namespace {

using Clock = std::chrono::steady_clock;

remote::RemoteImage read_image(const std::filesystem::path& file, std::string mime_type = {}) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError(file.string() + ": the image cannot be read");
  remote::RemoteImage image{{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()},
                            std::move(mime_type)};
  if (image.mime_type.empty()) image.mime_type = storage::image_mime_type(image.bytes, file);
  return image;
}

// A stored message as it is resent: the user's text with its stored pictures, or an answer's text.
remote::RemoteMessage remote_message(const storage::Message& stored) {
  remote::RemoteMessage m;
  m.role = stored.role == storage::Role::user ? Role::kUser : Role::kAssistant;
  m.text = stored.text;
  for (const storage::Attachment& a : stored.attachments)
    m.images.push_back(read_image(a.path, a.mime_type));
  return m;
}

std::string role_name(Role role) {
  return role == Role::kUser ? "user" : "assistant";
}

}  // namespace

RemoteChatService::RemoteChatService() = default;
RemoteChatService::~RemoteChatService() = default;

ModelSummary RemoteChatService::load_model(const std::filesystem::path& directory,
                                           const LoadProgressCallback& /*progress*/) {
  throw InvalidRequest(directory.string() + ": a remote chat service loads no model folder");
}

ModelSummary RemoteChatService::connect_remote(const RemoteEndpoint& endpoint) {
  remote::RemoteOptions options{endpoint.url, endpoint.api_key, endpoint.model};
  const std::vector<std::string> ids = remote::list_models(options);
  if (options.model.empty()) options.model = ids.front();
  if (std::find(ids.begin(), ids.end(), options.model) == ids.end()) {
    std::string listed;
    for (const std::string& id : ids) listed += (listed.empty() ? "" : ", ") + id;
    throw InvalidRequest(endpoint.url + " has no model '" + options.model + "' (it lists " +
                         listed + ")");
  }
  auto chat = std::make_unique<remote::RemoteChat>(options);
  chat_ = std::move(chat);
  sessions_.clear();
  summary_ = ModelSummary{
      .name = options.model,
      // Sessions remember the model they ran on; the endpoint is part of that.
      .fingerprint = "remote:" + options.model + "@" + options.url,
      .directory = options.url,
      .vision = true,  // the server refuses images its model cannot read, in its own words
      .max_context = 0,
      .backend = kRemoteBackend,
      .remote_url = options.url,
  };
  return *summary_;
}

void RemoteChatService::disconnect() {
  chat_.reset();
  summary_.reset();
  sessions_.clear();
}

void RemoteChatService::open_session(int64_t session_id, std::span<const storage::Message> stored) {
  if (!chat_) throw InvalidRequest("no remote model is connected");
  std::vector<remote::RemoteMessage> messages;
  for (const storage::Message& m : stored) messages.push_back(remote_message(m));
  sessions_[session_id] = std::move(messages);
}

std::vector<remote::RemoteMessage>& RemoteChatService::history(int64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end())
    throw InvalidRequest("session " + std::to_string(session_id) + " is not open");
  return it->second;
}

void RemoteChatService::check(const TurnRequest& request) const {
  check_request(summary_, request, ImageSupport::encoded);
}

// There is no local prompt: the server renders the messages with its own template. The preview
// and "Show prompt" show the messages as they are sent.
std::string RemoteChatService::render_prompt(const TurnRequest& request) const {
  if (!summary_) throw InvalidRequest("no remote model is connected");
  std::string text = "Sent to " + summary_->name + " at " + summary_->remote_url +
                     " as chat messages (the server renders the prompt):\n";
  // The line the window shows as "Sent:" (find_effort_line); thinking off has none, as locally.
  if (request.settings.thinking)
    text += "Reasoning Effort: " + std::to_string(request.settings.effort) +
            " (the request's reasoning_effort field)\n";
  if (!request.settings.system_prompt.empty())
    text += "\n[system] " + request.settings.system_prompt + "\n";
  if (auto it = sessions_.find(request.session_id); it != sessions_.end())
    for (const remote::RemoteMessage& m : it->second)
      text += "\n[" + role_name(m.role) + "] " + m.text + "\n";
  text += "\n[user] " + request.text + "\n";
  return text;
}

TurnOutcome RemoteChatService::send(const TurnRequest& request, const StreamCallbacks& callbacks,
                                    const std::atomic<bool>* stop) {
  check(request);
  std::vector<remote::RemoteMessage>& messages = history(request.session_id);
  remote::RemoteMessage user{.role = Role::kUser, .text = request.text, .images = {}};
  for (const std::filesystem::path& file : request.images) user.images.push_back(read_image(file));
  TurnOutcome outcome;
  outcome.prompt_text = render_prompt(request);
  // The thinking time as the window shows it for a local model: first piece of thought to last.
  Clock::time_point thinking_from{}, thinking_to{};
  StreamCallbacks timed = callbacks;
  timed.on_text = [&](StreamChannel channel, std::string_view text) {
    const auto now = Clock::now();
    if (channel == StreamChannel::kThinking && thinking_from == Clock::time_point{})
      thinking_from = now;
    if (channel == StreamChannel::kThinking) thinking_to = now;
    if (callbacks.on_text) callbacks.on_text(channel, text);
  };
  chat_->set_system_prompt(request.settings.system_prompt);
  chat_->set_history(messages);
  const GenerationResult g = chat_->send(user, turn_options(request.settings), timed, stop);
  messages.push_back(std::move(user));
  messages.push_back({.role = Role::kAssistant, .text = g.content, .images = {}});
  outcome.content = g.content;
  outcome.reasoning = g.reasoning;
  outcome.finish = g.finish;
  outcome.stats = turn_stats(g.stats);
  outcome.stats.thinking_ms =
      std::chrono::duration<double, std::milli>(thinking_to - thinking_from).count();
  return outcome;
}

}  // namespace flashdesk::ui
