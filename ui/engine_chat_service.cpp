// The engine-backed ChatService: model loading, stored history to chat messages, turns.
#include "ui/engine_chat_service.h"

#include <algorithm>

#include "engine/util/error.h"
#include "ui/turn_settings.h"

namespace flashdesk::ui {

std::string find_effort_line(const std::string& rendered_prompt) {
  const std::string key = "Reasoning Effort:";
  const size_t begin = rendered_prompt.find(key);
  if (begin == std::string::npos) return {};
  const size_t end = rendered_prompt.find('\n', begin);
  return rendered_prompt.substr(begin, end == std::string::npos ? end : end - begin);
}

EngineChatService::EngineChatService(EngineOptions options) : options_(std::move(options)) {}
EngineChatService::~EngineChatService() = default;

ModelSummary EngineChatService::load_model(const std::filesystem::path& directory,
                                           const LoadProgressCallback& progress) {
  if (!std::filesystem::is_directory(directory))
    throw IoError(directory.string() + ": no such folder");
  sessions_.clear();
  summary_.reset();
  engine_.reset();  // free the old weights before loading the new ones
  engine_ = ChatEngine::load(directory, options_, progress);
  summary_ = summary_of(*engine_, directory);
  return *summary_;
}

ChatMessage EngineChatService::to_chat_message(const storage::Message& stored) const {
  if (stored.role == storage::Role::user) return ChatMessage::user(stored.text);
  ChatMessage answer = ChatMessage::assistant(stored.text, stored.thinking);
  // A complete answer carries the ids it was generated as ([reasoning </think>] content EOS):
  // rendering them, not the re-encoded text, keeps the prompt identical to the live one.
  const auto& ids = stored.token_ids;
  const SpecialTokenIds& special = engine_->chat_template().special();
  if (stored.status != storage::MessageStatus::complete || ids.empty() || ids.back() != special.eos)
    return answer;
  const auto think_end = std::find(ids.begin(), ids.end(), special.think_end);
  const auto content_begin = think_end == ids.end() ? ids.begin() : think_end + 1;
  if (think_end != ids.end()) answer.reasoning_ids = std::vector<TokenId>(ids.begin(), think_end);
  answer.content_ids = std::vector<TokenId>(content_begin, ids.end() - 1);
  return answer;
}

void EngineChatService::open_session(int64_t session_id,
                                     std::span<const storage::Message> history) {
  if (!engine_) throw InvalidRequest("no model is loaded");
  std::vector<ChatMessage> messages;
  for (const storage::Message& m : history) messages.push_back(to_chat_message(m));
  auto& slot = sessions_[session_id];
  if (!slot) slot = std::make_unique<ChatSession>(*engine_);
  slot->set_messages(std::move(messages));
}

void EngineChatService::forget_session(int64_t session_id) {
  sessions_.erase(session_id);
}

ChatSession& EngineChatService::session(int64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end())
    throw InvalidRequest("session " + std::to_string(session_id) + " is not open");
  return *it->second;
}

const ChatSession* EngineChatService::find_session(int64_t session_id) const {
  auto it = sessions_.find(session_id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void EngineChatService::check(const TurnRequest& request) const {
  check_request(summary_, request);
}

std::string EngineChatService::render_prompt(const TurnRequest& request) const {
  if (!engine_) throw InvalidRequest("no model is loaded");
  std::vector<ChatMessage> conversation;
  if (!request.settings.system_prompt.empty())
    conversation.push_back(ChatMessage::system(request.settings.system_prompt));
  if (const ChatSession* s = find_session(request.session_id))
    conversation.insert(conversation.end(), s->messages().begin(), s->messages().end());
  conversation.push_back(ChatMessage::user(request.text));
  return engine_->chat_template().render_text(conversation, chat_options(request.settings));
}

TurnOutcome EngineChatService::send(const TurnRequest& request, const StreamCallbacks& callbacks,
                                    const std::atomic<bool>* stop) {
  check(request);
  ChatSession& chat = session(request.session_id);
  TurnOutcome outcome;
  outcome.effort_line = find_effort_line(render_prompt(request));
  StreamCallbacks wrapped = callbacks;
  wrapped.on_token = [&outcome, &callbacks](TokenId id) {
    outcome.generated_ids.push_back(id);
    if (callbacks.on_token) callbacks.on_token(id);
  };
  chat.set_system_prompt(request.settings.system_prompt);
  const TurnResult turn =
      chat.send(ChatMessage::user(request.text), turn_options(request.settings), wrapped, stop);
  outcome.content = turn.generation.content;
  outcome.reasoning = turn.generation.reasoning;
  outcome.finish = turn.generation.finish;
  outcome.stats = turn_stats(turn.generation.stats);
  return outcome;
}

}  // namespace flashdesk::ui
