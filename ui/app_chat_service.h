// The desktop app's ChatService: a local model folder through PersistentChatService (SSD KV
// restore, the API server on its engine) or a remote endpoint through RemoteChatService,
// whichever was loaded last. One of them is active; the other holds nothing.
//
// Goals: switching between local and remote models without restarting the worker; a failed
// switch keeps the model that was there. Non-goals: a local and a remote model at once, serving
// a remote model.
#pragma once

#include "ui/persistent_chat_service.h"
#include "ui/remote_chat_service.h"

namespace flashdesk::ui {

class AppChatService final : public ChatService {
 public:
  AppChatService(storage::PersistentChatOptions chat, EngineOptions engine = {})
      : local_(std::move(chat), std::move(engine)) {}

  ModelSummary load_model(const std::filesystem::path& directory,
                          const LoadProgressCallback& progress) override {
    remote_.disconnect();
    active_ = &local_;
    return local_.load_model(directory, progress);
  }
  // The endpoint is checked before the local model is unloaded: a wrong URL or model keeps it.
  ModelSummary connect_remote(const RemoteEndpoint& endpoint) override {
    const ModelSummary summary = remote_.connect_remote(endpoint);
    local_.unload();
    active_ = &remote_;
    return summary;
  }
  ServingInfo start_serving(const server::ServeOptions& options) override {
    if (active_ == &remote_)
      throw InvalidRequest("a remote model cannot be served from here: load a local model");
    return local_.start_serving(options);
  }
  void stop_serving() override { local_.stop_serving(); }
  void interrupt_serving() override { local_.interrupt_serving(); }
  void set_device(const std::string& backend, int threads) override {
    local_.set_device(backend, threads);
  }
  void set_cache_limits(const CacheLimits& limits) override { local_.set_cache_limits(limits); }
  std::optional<ModelSummary> model() const override { return active_->model(); }
  void open_session(int64_t session_id, std::span<const storage::Message> history) override {
    active_->open_session(session_id, history);
  }
  void forget_session(int64_t session_id) override { active_->forget_session(session_id); }
  bool erase_session(int64_t session_id) override { return active_->erase_session(session_id); }
  bool stores_messages() const override { return active_->stores_messages(); }
  std::optional<CacheStats> cache_stats() override { return active_->cache_stats(); }
  void check(const TurnRequest& request) const override { active_->check(request); }
  std::string render_prompt(const TurnRequest& request) const override {
    return active_->render_prompt(request);
  }
  TurnOutcome send(const TurnRequest& request, const StreamCallbacks& callbacks,
                   const std::atomic<bool>* stop) override {
    return active_->send(request, callbacks, stop);
  }

  PersistentChatService& local() { return local_; }

 private:
  PersistentChatService local_;
  RemoteChatService remote_;
  ChatService* active_ = &local_;
};

}  // namespace flashdesk::ui
