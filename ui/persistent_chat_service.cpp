// The persistent ChatService: model loading, prompt previews from the stored session, turns
// through PersistentChat with its restore counts turned into the app's TurnStats.
#include "ui/persistent_chat_service.h"

#include "app/server/server_kv_stores.h"

#include "engine/util/error.h"
#include "ui/turn_settings.h"

namespace flashdesk::ui {

namespace {

// The status line separates KV read back from the SSD from KV already in memory (the live
// sequence or a parked window); planning, reading and loading make up the restore time.
TurnStats persistent_stats(const GenerationStats& g) {
  TurnStats s = turn_stats(g);
  s.restored_tokens = g.reused_ssd_tokens;
  s.reused_tokens = g.reused_tokens - g.reused_ssd_tokens;
  s.replayed_tokens = g.replayed_tokens;
  s.restore_ms = g.plan_ms + g.read_ms + g.load_ms;
  return s;
}

}  // namespace

void apply_cache_limits(const CacheLimits& limits, storage::PersistentChatOptions& options) {
  options.blocks.disk_budget_bytes = limits.ssd_budget_bytes;
  options.blocks.retention = limits.ssd_retention;
  options.window_pool.budget_bytes = limits.pool_budget_bytes;
  options.window_pool.ttl = limits.pool_ttl;
}

PersistentChatService::PersistentChatService(storage::PersistentChatOptions chat,
                                             EngineOptions engine)
    : chat_options_(std::move(chat)), engine_options_(std::move(engine)) {}

PersistentChatService::~PersistentChatService() = default;

ModelSummary PersistentChatService::load_model(const std::filesystem::path& directory,
                                               const LoadProgressCallback& progress) {
  if (!std::filesystem::is_directory(directory))
    throw IoError(directory.string() + ": no such folder");
  unload();  // free the old weights before loading the new ones
  EngineOptions options = engine_options_;
  if (options.engram_cache_dir.empty())
    options.engram_cache_dir = chat_options_.layout.engram_map_dir();
  engine_ = ChatEngine::load(directory, options, progress);
  chat_ = std::make_unique<storage::PersistentChat>(*engine_, chat_options_);
  summary_ = summary_of(*engine_, directory);
  return *summary_;
}

void PersistentChatService::unload() {
  stop_serving();  // its requests end before the engine goes
  summary_.reset();
  chat_.reset();  // finishes its queued block writes and token commits first
  engine_.reset();
}

ServingInfo PersistentChatService::start_serving(const server::ServeOptions& options) {
  stop_serving();
  if (!engine_) throw InvalidRequest("no local model is loaded: there is nothing to serve");
  // The API's conversations go through the sessions' KV tiers: the window pool and the SSD blocks
  // (shared by content with the sessions), behind the server's live slots.
  const server::CompletionServiceOptions service{
      .kept_conversations = 2,
      .tiers = {.blocks = &chat_->blocks(), .window_pool = &chat_->window_pool()},
      .answers_dir = server::answers_dir(chat_options_.layout)};
  auto started =
      std::make_unique<server::BackgroundServer>(*engine_, engine_queue_, options, service);
  const ServingInfo info{.url = started->url(), .model = started->model_id()};
  std::lock_guard lock(server_mutex_);
  server_ = std::move(started);
  return info;
}

void PersistentChatService::stop_serving() {
  std::unique_ptr<server::BackgroundServer> stopping;
  {
    std::lock_guard lock(server_mutex_);
    stopping = std::move(server_);
  }
  stopping.reset();  // joins its thread: not under the mutex, which interrupt_serving takes
}

void PersistentChatService::interrupt_serving() {
  std::lock_guard lock(server_mutex_);
  if (server_) server_->interrupt();
}

storage::PersistentChat& PersistentChatService::require_chat() const {
  if (!chat_) throw InvalidRequest("no model is loaded");
  return *chat_;
}

// The history is read from the store at each turn; opening only makes the session current
// (parking the previous one's window). The KV is restored by the next send.
void PersistentChatService::open_session(int64_t session_id,
                                         std::span<const storage::Message> /*history*/) {
  const auto turn = engine_turn();
  require_chat().open_session(session_id);
}

// The stored messages changed under the live KV (regenerate, a failed turn): drop it; the next
// turn restores what still matches from the pool or the SSD.
void PersistentChatService::forget_session(int64_t session_id) {
  const auto turn = engine_turn();
  if (chat_ && chat_->session_id() == session_id) chat_->drop_live_kv();
}

bool PersistentChatService::erase_session(int64_t session_id) {
  if (!chat_) return false;
  const auto turn = engine_turn();
  chat_->delete_session(session_id);
  return true;
}

// Images are decoded here, before the worker shows the message or anything is stored: a file that
// is missing, unreadable or not an image is an InvalidRequest naming it. (send() reads the files
// again, once, for the bytes it stores and the pixels it encodes.)
void PersistentChatService::check(const TurnRequest& request) const {
  try {
    check_request(summary_, request, ImageSupport::encoded);
    for (const std::filesystem::path& file : request.images) engine_->prepare_image(file);
  } catch (const IoError& e) {
    throw InvalidRequest(e.what());
  } catch (const FormatError& e) {
    throw InvalidRequest(e.what());
  }
}

// The stored session's next prompt as PersistentChat renders it for a turn (the request's images
// are decoded for it); a chat not stored yet has only the system prompt of its settings before
// the message.
std::string PersistentChatService::render_prompt(const TurnRequest& request) const {
  storage::PersistentChat& chat = require_chat();
  const TurnOptions options = turn_options(request.settings, request.speculative);
  const auto turn = engine_turn();
  if (chat.store().find_session(request.session_id)) {
    chat.open_session(request.session_id);
    return chat.render_next(request.text, request.images, options).prompt.text;
  }
  std::vector<ImageRef> images;
  for (const std::filesystem::path& file : request.images)
    images.push_back(engine_->prepare_image(file));
  const Conversation first{request.settings.system_prompt, {user_turn(request.text, images)}};
  return render_conversation(engine_->chat_template(), first, chat_options(request.settings))
      .prompt.text;
}

TurnOutcome PersistentChatService::send(const TurnRequest& request,
                                        const StreamCallbacks& callbacks,
                                        const std::atomic<bool>* stop) {
  check(request);
  storage::PersistentChat& chat = require_chat();
  // An API request in flight finishes first; the window's turn waits in the same queue.
  const auto engine = engine_turn();
  chat.open_session(request.session_id);
  TurnOutcome outcome;
  StreamCallbacks wrapped = callbacks;
  wrapped.on_token = [&outcome, &callbacks](TokenId id) {
    outcome.generated_ids.push_back(id);
    if (callbacks.on_token) callbacks.on_token(id);
  };
  const storage::SessionTurn turn =
      chat.send(request.text, request.images, turn_options(request.settings, request.speculative),
                wrapped, stop);
  outcome.prompt_text = turn.turn.prompt_text;
  outcome.answer_message_id = turn.answer_message_id;
  outcome.content = turn.turn.generation.content;
  outcome.reasoning = turn.turn.generation.reasoning;
  outcome.finish = turn.turn.generation.finish;
  outcome.stats = persistent_stats(turn.turn.generation.stats);
  outcome.storage_warning = turn.storage_warning;
  return outcome;
}

}  // namespace flashdesk::ui
