// ChatService over storage::PersistentChat: turns restore the longest cached prefix (live KV, the
// window pool, SSD blocks with bounded replay) and store the user message and the answer token by
// token, so a session continued after a restart reads its KV back instead of recomputing it.
//
// Goals: the app's restart resumes from the SSD; one writer of messages (this service, see
// ChatService::stores_messages); images on models with a vision tower (stored as attachments of
// the user message, part of the KV block keys; check() decodes them first and refuses a bad file
// with InvalidRequest); the API server on the same engine (start_serving), whose turns and the
// window's take turns in one queue: every call that touches the engine or the chat's live state
// holds the engine's turn. Non-goals: several sessions live at once (PersistentChat keeps one;
// others are parked).
#pragma once

#include <memory>
#include <mutex>

#include "app/server/background_server.h"
#include "engine/runtime/chat_engine.h"
#include "storage/persistent_chat.h"
#include "ui/cache_stats.h"
#include "ui/chat_service.h"

namespace flashdesk::ui {

// Puts the cache sizes `limits` into the block store's and the window pool's options.
void apply_cache_limits(const CacheLimits& limits, storage::PersistentChatOptions& options);

class PersistentChatService final : public ChatService {
 public:
  // `chat.layout` is the data folder the worker's SessionStore uses too; Engram token maps built
  // at load are kept in its engram_map_dir() unless `engine` names another folder.
  PersistentChatService(storage::PersistentChatOptions chat, EngineOptions engine = {});
  ~PersistentChatService() override;

  ModelSummary load_model(const std::filesystem::path& directory,
                          const LoadProgressCallback& progress) override;
  // Frees the model (and stops the API server): nothing is loaded afterwards.
  void unload();
  ServingInfo start_serving(const server::ServeOptions& options) override;
  void stop_serving() override;
  void interrupt_serving() override;
  void set_device(const std::string& backend, int threads) override {
    engine_options_.backend = backend;
    engine_options_.threads = threads;
  }
  void set_cache_limits(const CacheLimits& limits) override {
    apply_cache_limits(limits, chat_options_);
  }
  std::optional<ModelSummary> model() const override { return summary_; }
  void open_session(int64_t session_id, std::span<const storage::Message> history) override;
  void forget_session(int64_t session_id) override;
  bool erase_session(int64_t session_id) override;
  bool stores_messages() const override { return true; }
  void check(const TurnRequest& request) const override;
  std::string render_prompt(const TurnRequest& request) const override;
  TurnOutcome send(const TurnRequest& request, const StreamCallbacks& callbacks,
                   const std::atomic<bool>* stop) override;

  // The cache panel's figures: SSD blocks and window pool of the loaded model's chat.
  std::optional<CacheStats> cache_stats() override {
    return chat_ ? std::optional(cache_stats_of(*chat_)) : std::nullopt;
  }

  // The underlying chat (tests: flush, block counts); null before a model is loaded.
  storage::PersistentChat* chat() { return chat_.get(); }

 private:
  storage::PersistentChat& require_chat() const;
  // Waits until no API request runs on the engine; the engine is the caller's until destroyed.
  std::unique_ptr<server::TurnQueue::Turn> engine_turn() const { return engine_queue_.wait(); }

  storage::PersistentChatOptions chat_options_;
  EngineOptions engine_options_;
  // The engine's one queue: the window's turns and the API server's (outlives both).
  mutable server::TurnQueue engine_queue_;
  std::unique_ptr<ChatEngine> engine_;
  std::unique_ptr<storage::PersistentChat> chat_;  // on engine_: declared after it
  // On engine_ and chat_: stopped first. The pointer is guarded by server_mutex_ (read by
  // interrupt_serving on another thread); the server is destroyed outside it.
  std::mutex server_mutex_;
  std::unique_ptr<server::BackgroundServer> server_;
  std::optional<ModelSummary> summary_;
};

}  // namespace flashdesk::ui
