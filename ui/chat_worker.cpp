// The worker thread's side of the app: sessions in SQLite, model loading, turns with token logging.
#include "ui/chat_worker.h"

#include <cmath>
#include <fstream>
#include <iterator>

#include "engine/runtime/conversation.h"
#include "engine/util/error.h"
#include "storage/session_images.h"

namespace flashdesk::ui {

namespace {

constexpr const char* kNewChatTitle = "New chat";
constexpr int kTitleChars = 48;

QString qstr(const std::string& s) {
  return QString::fromStdString(s);
}

MessageRow to_row(const storage::Message& m) {
  MessageRow row;
  row.id = m.id;
  row.from_user = m.role == storage::Role::user;
  row.text = qstr(m.text);
  row.thinking = qstr(m.thinking);
  row.interrupted = m.status == storage::MessageStatus::interrupted;
  row.stopped = m.end.stopped;
  if (m.end.thinking_ms >= 0) row.thinking_seconds = double(m.end.thinking_ms) / 1000.0;
  for (const auto& a : m.attachments) row.image_paths << qstr(a.path.string());
  return row;
}

SessionRow to_row(const storage::SessionInfo& s) {
  return SessionRow{s.id, qstr(s.title), s.updated_ms, s.message_count};
}

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot be read");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

QString finish_name(FinishReason reason) {
  return qstr(std::string(finish_reason_name(reason)));
}

}  // namespace

ChatWorker::ChatWorker(std::unique_ptr<ChatService> service, storage::StorageLayout layout)
    : service_(std::move(service)), layout_(std::move(layout)) {}

ChatWorker::~ChatWorker() = default;

void ChatWorker::initialize() {
  try {
    layout_.create_directories();
    lock_ = storage::InstanceLock::try_acquire(layout_.lock_file());
    storage::SessionStoreOptions options;
    options.repair = lock_.has_value();  // only the folder's owner folds crashed answers
    store_ = std::make_unique<storage::SessionStore>(layout_, options);
    token_log_ = std::make_unique<storage::TokenLog>(layout_.database());
    // A service that stores the turns owns the folder from its model load on: its
    // PersistentChat takes the lock and repairs the KV block store too (orphaned files).
    if (service_->stores_messages()) lock_.reset();
    list_sessions();
  } catch (const std::exception& e) {
    store_.reset();
    emit storageFailed(QString::fromUtf8(e.what()));
  }
}

void ChatWorker::loadModel(const QString& directory) {
  emit modelLoading(directory);
  open_sessions_.clear();  // the service forgets its sessions when the model changes
  stop_serving();          // the server's engine goes with the old model
  try {
    // One signal per per-mille step: a checkpoint of many thousand tensors must not flood the
    // GUI's event queue.
    int64_t shown = -1;
    const auto progress = [this, &shown](const LoadProgress& p) {
      const int64_t permille =
          p.total_bytes == 0 ? 1000 : int64_t(p.done_bytes * 1000 / p.total_bytes);
      if (permille == shown) return;
      shown = permille;
      emit modelProgress(qint64(p.done_bytes), qint64(p.total_bytes));
    };
    const ModelSummary summary = service_->load_model(directory.toStdString(), progress);
    emit draftHeadKnown(summary.draft_head);
    emit modelLoaded(qstr(summary.name), directory, qstr(summary.backend));
  } catch (const std::exception& e) {
    emit modelFailed(directory, QString::fromUtf8(e.what()));
  }
  if (serving_options_ && service_->model()) start_serving();
}

void ChatWorker::connectRemote(const QString& url, const QString& api_key, const QString& model) {
  emit modelLoading(url);
  try {
    const ModelSummary summary = service_->connect_remote(
        {.url = url.toStdString(), .api_key = api_key.toStdString(), .model = model.toStdString()});
    open_sessions_.clear();  // the local model is gone with its sessions' live KV
    if (serving_) {          // ... and its API server
      serving_ = false;
      emit servingStopped();
    }
    emit draftHeadKnown(summary.draft_head);
    emit modelLoaded(qstr(summary.name), url, qstr(summary.backend));
  } catch (const std::exception& e) {
    emit modelFailed(url, QString::fromUtf8(e.what()));
    if (const auto kept = service_->model()) {
      emit draftHeadKnown(kept->draft_head);
      emit modelLoaded(qstr(kept->name), qstr(kept->directory.string()), qstr(kept->backend));
    }
  }
  if (serving_options_ && !serving_ && service_->model()) start_serving();
}

void ChatWorker::setServing(bool on, int port, const QString& host, const QString& api_key) {
  if (!on) {
    serving_options_.reset();
    return stop_serving();
  }
  server::ServeOptions options;  // the CLI's defaults otherwise
  options.port = port;
  options.host = host.toStdString();
  options.api_key = api_key.toStdString();
  serving_options_ = options;
  if (service_->model()) start_serving();
}

// The server's rule is the CLI's: HttpServer refuses a non-loopback host without a key.
void ChatWorker::start_serving() {
  try {
    const ServingInfo info = service_->start_serving(*serving_options_);
    serving_ = true;
    emit servingStarted(qstr(info.url), qstr(info.model));
  } catch (const std::exception& e) {
    serving_ = false;
    serving_options_.reset();
    emit servingFailed(QString::fromUtf8(e.what()));
  }
}

void ChatWorker::stop_serving() {
  service_->stop_serving();  // waits for the answer in flight to end after its current token
  if (!serving_) return;
  serving_ = false;
  emit servingStopped();
}

void ChatWorker::setCacheLimits(const CacheLimits& limits) {
  service_->set_cache_limits(limits);
}

void ChatWorker::setDevice(const QString& backend, int threads) {
  service_->set_device(backend.toStdString(), threads);
}

void ChatWorker::list_sessions() {
  if (!ready()) return;
  const auto infos =
      filter_.isEmpty() ? store_->list_sessions() : store_->search(filter_.toStdString());
  QList<SessionRow> rows;
  for (const auto& info : infos) rows << to_row(info);
  emit sessionsListed(rows);
}

void ChatWorker::listSessions(const QString& filter) {
  filter_ = filter.trimmed();
  list_sessions();
}

void ChatWorker::createSession(SessionChoices choices) {
  if (!ready()) return;
  storage::SessionSettings settings = with_choices({}, choices);
  if (const auto model = service_->model()) settings.model_fingerprint = model->fingerprint;
  const int64_t id = store_->create_session(kNewChatTitle, settings);
  list_sessions();
  emit sessionCreated(id);
}

void ChatWorker::openSession(qint64 id) {
  if (!ready()) return;
  try {
    const storage::SessionInfo info = store_->session(id);
    QList<MessageRow> rows;
    for (const auto& m : store_->messages(id)) rows << to_row(m);
    emit sessionOpened(id, choices_of(info.settings), rows);
    if (service_->model()) ensure_open(id);  // a persistent service restores KV here
  } catch (const std::exception& e) {
    emit turnFailed(id, QString::fromUtf8(e.what()));
  }
}

void ChatWorker::renameSession(qint64 id, const QString& title) {
  if (!ready() || title.trimmed().isEmpty()) return;
  store_->rename_session(id, title.trimmed().toStdString());
  list_sessions();
}

void ChatWorker::deleteSession(qint64 id) {
  if (!ready()) return;
  const bool erased = service_->erase_session(id);  // a persistent service erases it all
  open_sessions_.erase(id);
  if (!erased) store_->delete_session(id);
  list_sessions();
  emit sessionDeleted(id);
}

storage::SessionSettings ChatWorker::settings_with(qint64 id, SessionChoices choices) {
  storage::SessionSettings settings = with_choices(store_->session(id).settings, choices);
  if (const auto model = service_->model()) settings.model_fingerprint = model->fingerprint;
  return settings;
}

void ChatWorker::saveChoices(qint64 id, SessionChoices choices) {
  if (!ready() || !store_->find_session(id)) return;
  try {
    store_->update_settings(id, settings_with(id, choices));
  } catch (const std::exception& e) {  // out-of-range values: say so, keep the stored ones
    emit turnFailed(id, QString::fromUtf8(e.what()));
  }
}

void ChatWorker::previewPrompt(qint64 id, SessionChoices choices, const QString& text) {
  if (!ready() || !service_->model()) return;
  try {
    TurnRequest request;
    request.session_id = id;
    request.text = text.toStdString();
    request.settings =
        store_->find_session(id) ? settings_with(id, choices) : with_choices({}, choices);
    if (store_->find_session(id)) ensure_open(id);
    const std::string prompt = service_->render_prompt(request);
    emit promptPreviewed(id, qstr(find_effort_line(prompt)), qstr(prompt));
  } catch (const std::exception& e) {
    emit turnFailed(id, QString::fromUtf8(e.what()));
  }
}

void ChatWorker::ensure_open(qint64 id) {
  if (open_sessions_.count(id)) return;
  const auto history = store_->messages(id);
  service_->open_session(id, history);
  open_sessions_.insert(id);
}

void ChatWorker::title_from_first_message(qint64 id, const QString& text) {
  if (store_->session(id).title != kNewChatTitle) return;
  QString title = text.simplified().left(kTitleChars);
  if (title.isEmpty()) title = QStringLiteral("Image question");
  store_->rename_session(id, title.toStdString());
}

void ChatWorker::send(qint64 id, const QString& text, const QStringList& images,
                      SessionChoices choices) {
  if (!ready()) return emit turnFailed(id, QStringLiteral("the session database is not open"));
  TurnRequest request;
  request.session_id = id;
  request.text = text.toStdString();
  int64_t user_ordinal = 0;
  try {
    request.settings = settings_with(id, choices);
    const auto model = service_->model();
    request.speculative = model && model->draft_head &&
                          speculative_enabled(speculative_, model->draft_head, model->backend);
    for (const QString& path : images) request.images.push_back(path.toStdString());
    service_->check(request);
    ensure_open(id);
    const auto before = store_->messages(id);
    user_ordinal = before.empty() ? 0 : before.back().ordinal + 1;
    store_->update_settings(id, request.settings);
    if (before.empty()) title_from_first_message(id, text);
    emit userMessageStored(id, store_user_message(id, request));
  } catch (const std::exception& e) {
    return emit turnFailed(id, QString::fromUtf8(e.what()));
  }
  run_turn(id, request, user_ordinal);
  list_sessions();
}

MessageRow ChatWorker::store_user_message(qint64 id, const TurnRequest& request) {
  if (service_->stores_messages()) {  // the service appends it as the turn starts
    MessageRow row;
    row.text = qstr(request.text);
    for (const auto& path : request.images) row.image_paths << qstr(path.string());
    return row;
  }
  storage::NewMessage user;
  user.text = request.text;
  for (const auto& path : request.images) {
    std::vector<uint8_t> bytes = read_file(path);
    std::string mime_type = storage::image_mime_type(bytes, path);  // the store requires one
    user.images.push_back({std::move(bytes), std::move(mime_type)});
  }
  store_->append_message(id, user);
  return to_row(store_->messages(id).back());
}

void ChatWorker::run_turn(qint64 id, const TurnRequest& request, int64_t user_ordinal) {
  stop_.store(closing_.load());
  const bool log = !service_->stores_messages();  // else the service logs the answer
  const storage::AnswerHandle answer = log ? token_log_->begin_answer(id) : storage::AnswerHandle{};
  emit answerStarted(id);
  std::vector<TokenId> ids;  // sampled, not yet logged with their text
  bool generated = false;
  StreamCallbacks callbacks;
  callbacks.on_token = [&ids, &generated](TokenId token) {
    ids.push_back(token);
    generated = true;
  };
  callbacks.on_text = [&](StreamChannel channel, std::string_view text) {
    const bool thinking = channel == StreamChannel::kThinking;
    if (log) token_log_->append(answer, ids, thinking ? "" : text, thinking ? text : "");
    ids.clear();
    emit answerText(id, thinking, QString::fromUtf8(text.data(), qsizetype(text.size())));
  };
  try {
    const TurnOutcome outcome = service_->send(request, callbacks, &stop_);
    // A stop while the app closes is not the user's: that answer was interrupted.
    storage::AnswerEnd end;
    end.stopped = outcome.finish == FinishReason::kStopped && !closing_.load();
    if (!outcome.reasoning.empty()) end.thinking_ms = std::llround(outcome.stats.thinking_ms);
    if (log) {
      token_log_->append(answer, ids, {});  // EOS and any ids whose text never completed
      const bool stopped = outcome.finish == FinishReason::kStopped;
      token_log_->finish(
          answer, stopped ? storage::MessageStatus::interrupted : storage::MessageStatus::complete,
          end);
    } else if (outcome.answer_message_id != 0 && closing_.load() &&
               outcome.finish == FinishReason::kStopped) {
      store_->set_answer_end(outcome.answer_message_id, end);
    }
    emit answerFinished(id, outcome.stats, finish_name(outcome.finish), qstr(outcome.prompt_text));
    if (outcome.storage_warning) emit storageWarning(id, qstr(*outcome.storage_warning));
    count_turn(outcome.stats);
    refreshCacheStats();
  } catch (const std::exception& e) {
    if (log) {
      token_log_->append(answer, ids, {});
      token_log_->finish(answer, storage::MessageStatus::interrupted);
    }
    // A turn refused before its first token leaves no trace (its text goes back to the
    // composer); one that failed later keeps what was generated. Either way the service did
    // not take the turn: it reopens the session from what is stored.
    if (!generated) store_->delete_messages_from(id, user_ordinal);
    service_->forget_session(id);
    open_sessions_.erase(id);
    emit turnFailed(id, QString::fromUtf8(e.what()));
  }
}

void ChatWorker::count_turn(const TurnStats& stats) {
  ++run_totals_.turns;
  run_totals_.prompt_tokens += stats.prompt_tokens;
  run_totals_.restored_tokens += stats.restored_tokens;
  run_totals_.reused_tokens += stats.reused_tokens;
}

// Reading the block index is a quick SQL count; the worker does it between turns, so the GUI
// never waits on the database for it.
void ChatWorker::refreshCacheStats() {
  CacheStats stats;
  try {
    stats = service_->cache_stats().value_or(CacheStats{});
  } catch (const std::exception& e) {  // a broken database shows as no caches, not a crash
    qWarning("cache statistics: %s", e.what());
  }
  stats.turns = run_totals_.turns;
  stats.prompt_tokens = run_totals_.prompt_tokens;
  stats.restored_tokens = run_totals_.restored_tokens;
  stats.reused_tokens = run_totals_.reused_tokens;
  emit cacheStatsReady(stats);
}

void ChatWorker::regenerate(qint64 id, SessionChoices choices) {
  if (!ready()) return;
  try {
    const auto messages = store_->messages(id);
    auto last_user = messages.rbegin();
    while (last_user != messages.rend() && last_user->role != storage::Role::user) ++last_user;
    if (last_user == messages.rend())
      return emit turnFailed(id, QStringLiteral("there is no question to answer again"));
    const QString text = qstr(last_user->text);
    // The question is sent again as it was; the service reopens the shorter history.
    store_->delete_messages_from(id, last_user->ordinal);
    service_->forget_session(id);
    open_sessions_.erase(id);
    openSession(id);
    send(id, text, {}, choices);
  } catch (const std::exception& e) {
    emit turnFailed(id, QString::fromUtf8(e.what()));
  }
}

}  // namespace flashdesk::ui
