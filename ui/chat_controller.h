// Owns the worker thread and the ChatWorker on it; the GUI calls these methods (they queue the
// work) and connects to worker() signals, which arrive queued on the GUI thread.
#pragma once

#include <QObject>
#include <QThread>
#include <memory>

#include "ui/chat_worker.h"

namespace flashdesk::ui {

class ChatController : public QObject {
  Q_OBJECT

 public:
  // Starts the thread and opens the data folder on it.
  ChatController(std::unique_ptr<ChatService> service, storage::StorageLayout layout,
                 QObject* parent = nullptr);
  // Stops an answer in progress (what was generated is kept), then joins the thread.
  ~ChatController() override;

  ChatWorker* worker() const { return worker_; }

  void loadModel(const QString& directory);
  void connectRemote(const QString& url, const QString& api_key, const QString& model);
  void setServing(bool on, int port, const QString& host = QStringLiteral("127.0.0.1"),
                  const QString& api_key = {});
  void setDevice(const QString& backend, int threads);  // used by the next loadModel
  void setCacheLimits(const CacheLimits& limits);       // used by the next loadModel
  void setSpeculative(SpeculativeChoice choice);        // used by the next turn
  void listSessions(const QString& filter);
  void createSession(SessionChoices choices);
  void openSession(qint64 id);
  void renameSession(qint64 id, const QString& title);
  void deleteSession(qint64 id);
  void saveChoices(qint64 id, SessionChoices choices);
  void previewPrompt(qint64 id, SessionChoices choices, const QString& text);
  void send(qint64 id, const QString& text, const QStringList& images, SessionChoices choices);
  void regenerate(qint64 id, SessionChoices choices);
  void refreshCacheStats();
  void stop() { worker_->request_stop(); }

 private:
  template <class... Args>
  void queue(void (ChatWorker::*slot)(Args...), std::decay_t<Args>... args);

  QThread thread_;
  ChatWorker* worker_;  // deleted on its own thread when the thread finishes
};

}  // namespace flashdesk::ui
