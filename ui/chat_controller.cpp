// The worker thread's lifetime and the queued calls into it.
#include "ui/chat_controller.h"

namespace flashdesk::ui {

SessionChoices choices_of(const storage::SessionSettings& settings) {
  SessionChoices c;
  c.effort = settings.effort;
  c.thinking = settings.thinking;
  c.system_prompt = QString::fromStdString(settings.system_prompt);
  c.temperature = settings.sampling.temperature;
  c.top_p = settings.sampling.top_p;
  c.max_new_tokens = settings.max_new_tokens;
  return c;
}

storage::SessionSettings with_choices(storage::SessionSettings settings,
                                      const SessionChoices& choices) {
  settings.effort = choices.effort;
  settings.thinking = choices.thinking;
  settings.system_prompt = choices.system_prompt.toStdString();
  settings.sampling.temperature = float(choices.temperature);
  settings.sampling.top_p = float(choices.top_p);
  settings.max_new_tokens = choices.max_new_tokens;
  return settings;
}

void register_chat_types() {
  qRegisterMetaType<SessionRow>();
  qRegisterMetaType<MessageRow>();
  qRegisterMetaType<SessionChoices>();
  qRegisterMetaType<TurnStats>();
  qRegisterMetaType<CacheStats>();
  qRegisterMetaType<QList<SessionRow>>();
  qRegisterMetaType<QList<MessageRow>>();
}

ChatController::ChatController(std::unique_ptr<ChatService> service, storage::StorageLayout layout,
                               QObject* parent)
    : QObject(parent), worker_(new ChatWorker(std::move(service), std::move(layout))) {
  register_chat_types();
  thread_.setObjectName(QStringLiteral("flashdesk-worker"));
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.start();
  queue(&ChatWorker::initialize);
}

ChatController::~ChatController() {
  worker_->request_close();
  thread_.quit();  // runs after the queued calls before it; the answer in progress ends first
  thread_.wait();
}

template <class... Args>
void ChatController::queue(void (ChatWorker::*slot)(Args...), std::decay_t<Args>... args) {
  QMetaObject::invokeMethod(
      worker_, [w = worker_, slot, args...] { (w->*slot)(args...); }, Qt::QueuedConnection);
}

void ChatController::loadModel(const QString& directory) {
  queue(&ChatWorker::loadModel, directory);
}

void ChatController::connectRemote(const QString& url, const QString& api_key,
                                   const QString& model) {
  queue(&ChatWorker::connectRemote, url, api_key, model);
}

// Off: the API's answer in flight is ended at once, from this thread, so the stop queued to the
// worker is not kept waiting behind it (nor behind a window turn waiting for the engine).
void ChatController::setServing(bool on, int port, const QString& host, const QString& api_key) {
  if (!on) worker_->interrupt_serving();
  queue(&ChatWorker::setServing, on, port, host, api_key);
}
void ChatController::setDevice(const QString& backend, int threads) {
  queue(&ChatWorker::setDevice, backend, threads);
}

void ChatController::setSpeculative(SpeculativeChoice choice) {
  queue(&ChatWorker::setSpeculative, choice);
}

void ChatController::setCacheLimits(const CacheLimits& limits) {
  queue(&ChatWorker::setCacheLimits, limits);
}
void ChatController::listSessions(const QString& filter) {
  queue(&ChatWorker::listSessions, filter);
}
void ChatController::createSession(SessionChoices choices) {
  queue(&ChatWorker::createSession, choices);
}
void ChatController::openSession(qint64 id) {
  queue(&ChatWorker::openSession, id);
}
void ChatController::renameSession(qint64 id, const QString& title) {
  queue(&ChatWorker::renameSession, id, title);
}
void ChatController::deleteSession(qint64 id) {
  queue(&ChatWorker::deleteSession, id);
}
void ChatController::saveChoices(qint64 id, SessionChoices choices) {
  queue(&ChatWorker::saveChoices, id, choices);
}
void ChatController::previewPrompt(qint64 id, SessionChoices choices, const QString& text) {
  queue(&ChatWorker::previewPrompt, id, choices, text);
}
void ChatController::send(qint64 id, const QString& text, const QStringList& images,
                          SessionChoices choices) {
  queue(&ChatWorker::send, id, text, images, choices);
}
void ChatController::regenerate(qint64 id, SessionChoices choices) {
  queue(&ChatWorker::regenerate, id, choices);
}

void ChatController::refreshCacheStats() {
  queue(&ChatWorker::refreshCacheStats);
}

}  // namespace flashdesk::ui
