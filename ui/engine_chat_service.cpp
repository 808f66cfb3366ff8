// The engine-backed ChatService: model loading, stored history to chat messages, turns.
#include "ui/engine_chat_service.h"

#include <algorithm>

#include "engine/util/error.h"
#include "ui/turn_settings.h"

namespace flashdesk::ui {

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

namespace {

// A stored message as the engine's conversation keeps it (answers with their sampled ids).
ConversationMessage conversation_message(const storage::Message& stored) {
  ConversationMessage m;
  m.role = stored.role == storage::Role::user ? Role::kUser : Role::kAssistant;
  m.text = stored.text;
  if (m.role == Role::kAssistant) {
    m.thinking = stored.thinking;
    m.sampled_ids = stored.token_ids;
  }
  return m;
}

}  // namespace

void EngineChatService::open_session(int64_t session_id,
                                     std::span<const storage::Message> history) {
  if (!engine_) throw InvalidRequest("no model is loaded");
  std::vector<ConversationMessage> messages;
  for (const storage::Message& m : history) messages.push_back(conversation_message(m));
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
  ChatSession preview(*engine_);
  if (const ChatSession* s = find_session(request.session_id)) preview.set_messages(s->messages());
  preview.set_system_prompt(request.settings.system_prompt);
  return preview.render(user_turn(request.text), chat_options(request.settings)).prompt.text;
}

TurnOutcome EngineChatService::send(const TurnRequest& request, const StreamCallbacks& callbacks,
                                    const std::atomic<bool>* stop) {
  check(request);
  ChatSession& chat = session(request.session_id);
  TurnOutcome outcome;
  StreamCallbacks wrapped = callbacks;
  wrapped.on_token = [&outcome, &callbacks](TokenId id) {
    outcome.generated_ids.push_back(id);
    if (callbacks.on_token) callbacks.on_token(id);
  };
  chat.set_system_prompt(request.settings.system_prompt);
  const TurnResult turn = chat.send(
      user_turn(request.text), turn_options(request.settings, request.speculative), wrapped, stop);
  outcome.prompt_text = turn.prompt_text;
  outcome.content = turn.generation.content;
  outcome.reasoning = turn.generation.reasoning;
  outcome.finish = turn.generation.finish;
  outcome.stats = turn_stats(turn.generation.stats);
  return outcome;
}

}  // namespace flashdesk::ui
