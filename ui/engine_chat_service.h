// ChatService over the engine's live-KV chat sessions (engine/runtime/chat_engine.h): a stored
// session is rendered from its messages and prefilled on its first turn; later turns reuse the
// live KV. SSD restore is the persistent-session layer's job (another ChatService).
#pragma once

#include <map>
#include <memory>

#include "engine/runtime/chat_engine.h"
#include "ui/chat_service.h"

namespace flashdesk::ui {

class EngineChatService final : public ChatService {
 public:
  explicit EngineChatService(EngineOptions options = {});
  ~EngineChatService() override;

  ModelSummary load_model(const std::filesystem::path& directory,
                          const LoadProgressCallback& progress) override;
  void set_device(const std::string& backend, int threads) override {
    options_.backend = backend;
    options_.threads = threads;
  }
  std::optional<ModelSummary> model() const override { return summary_; }
  void open_session(int64_t session_id, std::span<const storage::Message> history) override;
  void forget_session(int64_t session_id) override;
  void check(const TurnRequest& request) const override;
  std::string render_prompt(const TurnRequest& request) const override;
  TurnOutcome send(const TurnRequest& request, const StreamCallbacks& callbacks,
                   const std::atomic<bool>* stop) override;

 private:
  ChatSession& session(int64_t session_id);
  const ChatSession* find_session(int64_t session_id) const;

  EngineOptions options_;
  std::unique_ptr<ChatEngine> engine_;
  std::optional<ModelSummary> summary_;
  std::map<int64_t, std::unique_ptr<ChatSession>> sessions_;  // by session id, opened ones
};

}  // namespace flashdesk::ui
