// ChatService over a model served elsewhere (app/remote/: vLLM, SGLang, another FlashDesk's
// `serve`): the app's sessions stay in its SQLite store as with a local model (the worker stores
// the messages, images and answers); each turn resends the session's history to the endpoint.
//
// Goals: the same turn settings as a local model (effort, thinking, sampling, answer length,
// system prompt, images as data URLs), thinking and answer streamed on their channels, the
// server's cached-token count reported as reused. Non-goals: KV persistence and fast resume (the
// server owns its cache: nothing is restored from this machine's SSD), prompt rendering (the
// server applies its chat template).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "app/remote/remote_chat.h"
#include "ui/chat_service.h"

namespace flashdesk::ui {

class RemoteChatService final : public ChatService {
 public:
  RemoteChatService();
  ~RemoteChatService() override;

  // A remote service has no model folders: connect_remote is its load.
  ModelSummary load_model(const std::filesystem::path& directory,
                          const LoadProgressCallback& progress) override;
  ModelSummary connect_remote(const RemoteEndpoint& endpoint) override;
  // Forgets the endpoint: no model afterwards.
  void disconnect();
  void set_device(const std::string& /*backend*/, int /*threads*/) override {}
  std::optional<ModelSummary> model() const override { return summary_; }
  void open_session(int64_t session_id, std::span<const storage::Message> history) override;
  void forget_session(int64_t session_id) override { sessions_.erase(session_id); }
  void check(const TurnRequest& request) const override;
  std::string render_prompt(const TurnRequest& request) const override;
  TurnOutcome send(const TurnRequest& request, const StreamCallbacks& callbacks,
                   const std::atomic<bool>* stop) override;

 private:
  std::vector<remote::RemoteMessage>& history(int64_t session_id);

  std::unique_ptr<remote::RemoteChat> chat_;
  std::optional<ModelSummary> summary_;
  std::map<int64_t, std::vector<remote::RemoteMessage>> sessions_;  // opened ones, by id
};

}  // namespace flashdesk::ui
