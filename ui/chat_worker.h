// The desktop app's worker: owns the session database, the token log and the ChatService, lives
// on its own thread and talks to the GUI only through queued signals and slots.
//
// Goals: the GUI thread never waits for the disk or the model; every answer is logged token by
// token as it is produced (a crash or a close mid-answer keeps what was generated); each session
// keeps its own effort and thinking choice. Non-goals: widgets, the thread itself (ChatController).
#pragma once

#include <QObject>
#include <atomic>
#include <memory>
#include <optional>
#include <set>

#include "app/server/http_server.h"
#include "engine/runtime/speculative_choice.h"
#include "storage/session_store.h"
#include "storage/storage_layout.h"
#include "storage/token_log.h"
#include "ui/chat_service.h"
#include "ui/chat_types.h"

namespace flashdesk::ui {

class ChatWorker : public QObject {
  Q_OBJECT

 public:
  ChatWorker(std::unique_ptr<ChatService> service, storage::StorageLayout layout);
  ~ChatWorker() override;

  // Thread-safe: ends the answer being generated after its current token.
  void request_stop() { stop_.store(true); }
  // Thread-safe: stops the answer in progress and every later one (the app is closing).
  void request_close() {
    closing_.store(true);
    stop_.store(true);
    service_->interrupt_serving();  // an API answer the worker may be waiting behind
  }
  // Thread-safe: ends the API server's answer in flight after its current token (serving is
  // being switched off; setServing(false) follows).
  void interrupt_serving() { service_->interrupt_serving(); }

 public slots:
  void initialize();
  void loadModel(const QString& directory);
  // A model served elsewhere (RemoteEndpoint): answers like loadModel, with the URL as directory
  // and "remote" as backend; a failure keeps the model that was loaded (modelLoaded again).
  void connectRemote(const QString& url, const QString& api_key, const QString& model);
  // The API server on the loaded model, on `host`:`port` (0: any free port), requiring `api_key`
  // when not empty (a host other than loopback needs one: servingFailed otherwise). On: started
  // now when a model is loaded (else at its load), and again after each model load; answers with
  // servingStarted, or servingFailed (then it is off). Off: stopped, servingStopped.
  void setServing(bool on, int port, const QString& host, const QString& api_key);
  void setDevice(const QString& backend, int threads);  // for the next loadModel
  void setCacheLimits(const CacheLimits& limits);       // for the next loadModel
  // DSpark speculative decoding for the next turns (speculative_enabled: Automatic is on for a
  // model with a draft head on a GPU backend); never for a model without a head.
  void setSpeculative(flashdesk::SpeculativeChoice choice) { speculative_ = choice; }
  void listSessions(const QString& filter);
  void createSession(flashdesk::ui::SessionChoices choices);
  void openSession(qint64 id);
  void renameSession(qint64 id, const QString& title);
  void deleteSession(qint64 id);
  void saveChoices(qint64 id, flashdesk::ui::SessionChoices choices);
  void previewPrompt(qint64 id, flashdesk::ui::SessionChoices choices, const QString& text);
  void send(qint64 id, const QString& text, const QStringList& images,
            flashdesk::ui::SessionChoices choices);
  void regenerate(qint64 id, flashdesk::ui::SessionChoices choices);
  void refreshCacheStats();  // answers with cacheStatsReady

 signals:
  void storageFailed(const QString& message);
  void modelLoading(const QString& directory);
  // Weight bytes uploaded so far; sent when the per-mille figure changes, last with done == total.
  void modelProgress(qint64 done_bytes, qint64 total_bytes);
  void modelLoaded(const QString& name, const QString& directory, const QString& backend);
  // Sent just before each modelLoaded: whether that model's DSpark draft head loaded.
  void draftHeadKnown(bool available);
  void modelFailed(const QString& directory, const QString& message);
  void sessionsListed(const QList<flashdesk::ui::SessionRow>& rows);
  void sessionCreated(qint64 id);
  void sessionOpened(qint64 id, flashdesk::ui::SessionChoices choices,
                     const QList<flashdesk::ui::MessageRow>& messages);
  void sessionDeleted(qint64 id);
  void promptPreviewed(qint64 id, const QString& effort_line, const QString& prompt);
  void userMessageStored(qint64 session, const flashdesk::ui::MessageRow& message);
  void answerStarted(qint64 session);
  void answerText(qint64 session, bool thinking, const QString& text);
  // `prompt` is the prompt the turn tokenised, as text (TurnOutcome::prompt_text).
  void answerFinished(qint64 session, const flashdesk::ui::TurnStats& stats, const QString& finish,
                      const QString& prompt);
  void turnFailed(qint64 session, const QString& message);
  // A turn went on although storage failed (disk full while spilling KV blocks or logging).
  void storageWarning(qint64 session, const QString& message);
  void servingStarted(const QString& url, const QString& model);
  void servingStopped();
  void servingFailed(const QString& message);  // the server is off
  // After each turn and on request: the caches' figures and this run's totals.
  void cacheStatsReady(const flashdesk::ui::CacheStats& stats);

 private:
  bool ready() const { return store_ != nullptr; }
  void list_sessions();
  storage::SessionSettings settings_with(qint64 id, SessionChoices choices);
  void ensure_open(qint64 id);
  // Stores the user's message unless the service stores it with the turn; the row to show.
  MessageRow store_user_message(qint64 id, const TurnRequest& request);
  // Generates the answer to the stored user message at `user_ordinal`.
  void run_turn(qint64 id, const TurnRequest& request, int64_t user_ordinal);
  void title_from_first_message(qint64 id, const QString& text);
  void count_turn(const TurnStats& stats);
  void start_serving();  // serving_options_'s server on the loaded model
  void stop_serving();

  std::unique_ptr<ChatService> service_;
  storage::StorageLayout layout_;
  std::optional<storage::InstanceLock> lock_;
  std::unique_ptr<storage::SessionStore> store_;
  std::unique_ptr<storage::TokenLog> token_log_;
  std::set<qint64> open_sessions_;  // opened in the service since the model was loaded
  QString filter_;
  // Set: the user wants the API server with these options.
  std::optional<server::ServeOptions> serving_options_;
  bool serving_ = false;                                      // the server runs
  CacheStats run_totals_;                                     // only the per-run fields are used
  SpeculativeChoice speculative_ = SpeculativeChoice::kAuto;  // the app setting
  std::atomic<bool> stop_{false};
  std::atomic<bool> closing_{false};
};

}  // namespace flashdesk::ui
