// The main window's layout and its wiring to the worker.
#include "ui/main_window.h"

#include <QActionGroup>
#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QStatusBar>
#include <QVBoxLayout>

#include "engine/runtime/conversation.h"
#include "ui/cache_panel.h"
#include "ui/composer.h"
#include "ui/effort_control.h"
#include "ui/message_view.h"
#include "ui/session_settings_dialog.h"
#include "ui/session_sidebar.h"
#include "ui/theme.h"
#include "ui/welcome_text.h"

namespace flashdesk::ui {

namespace {

QString stats_text(const TurnStats& s) {
  QString text = QObject::tr("%1 tokens/s · prompt %2 tokens: %3 reused, %4 computed")
                     .arg(s.decode_tokens_per_s, 0, 'f', 1)
                     .arg(s.prompt_tokens)
                     .arg(s.reused_tokens)
                     .arg(s.computed_tokens);
  if (s.restored_tokens > 0 || s.replayed_tokens > 0)
    text += QObject::tr(" · restored %1 tokens from SSD in %2 ms, %3 replayed")
                .arg(s.restored_tokens)
                .arg(s.restore_ms, 0, 'f', 0)
                .arg(s.replayed_tokens);
  if (s.speculative)  // DSpark: drafts the model accepted per verifying step
    text += QObject::tr(" · DSpark accepted %1 per verify (%2 verifies)")
                .arg(s.mean_accepted, 0, 'f', 2)
                .arg(s.verifies);
  return text + QObject::tr(" · answer %1 tokens (%2 thinking) · first token %3 ms")
                    .arg(s.generated_tokens)
                    .arg(s.thinking_tokens)
                    .arg(s.ttft_ms, 0, 'f', 0);
}

QString finish_note(const QString& finish) {
  if (finish == QLatin1String("stopped")) return QObject::tr("stopped");
  if (finish == QLatin1String("length")) return QObject::tr("cut at the token limit");
  if (finish == QLatin1String("context_full")) return QObject::tr("the context is full");
  return {};
}

}  // namespace

MainWindow::MainWindow(ChatController& controller, const QString& model_dir, QSettings* settings,
                       QWidget* parent)
    : QMainWindow(parent),
      controller_(controller),
      sidebar_(new SessionSidebar),
      view_(new MessageView),
      effort_(new EffortControl),
      composer_(new Composer),
      model_name_(new QLabel),
      model_error_(new QLabel),
      model_progress_(new QProgressBar),
      storage_warning_(new QLabel),
      remote_note_(new QLabel),
      server_status_(new QLabel),
      effort_line_(new QLabel),
      regenerate_(new QPushButton(tr("Regenerate"))),
      settings_(new QPushButton(tr("Chat settings…"))),
      status_(new QLabel),
      cache_panel_(new CachePanel(this)),
      themes_(new QActionGroup(this)),
      settings_store_(settings) {
  setWindowTitle(tr("FlashDesk"));
  if (settings_store_) {
    QStringList problems;
    app_settings_ = load_app_settings(*settings_store_, &problems);
    for (const QString& problem : problems) qWarning("settings: %s", qPrintable(problem));
    if (app_settings_.theme != ThemeChoice::system) apply_theme(app_settings_.theme);
  }
  choices_ = app_settings_.new_chat;  // what the first message of a new chat gets
  controller_.setSpeculative(app_settings_.speculative);
  effort_->setChoices(choices_);
  view_->setEmptyText(welcome_text(QString()));
  regenerate_->setEnabled(false);
  auto* splitter = new QSplitter;
  splitter->addWidget(sidebar_);
  splitter->addWidget(buildChatPane());
  splitter->setStretchFactor(1, 1);
  splitter->setSizes({240, 760});
  auto* central = new QWidget;
  auto* layout = new QVBoxLayout(central);
  layout->addWidget(buildModelBar());
  layout->addWidget(splitter, 1);
  setCentralWidget(central);
  status_->setObjectName(QStringLiteral("turnStats"));
  status_->setAccessibleName(tr("Status"));
  statusBar()->addWidget(status_, 1);
  statusBar()->addPermanentWidget(storage_warning_);
  server_status_->setObjectName(QStringLiteral("serverStatus"));
  server_status_->setAccessibleName(tr("API server"));
  server_status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  server_status_->hide();
  statusBar()->addPermanentWidget(server_status_);
  resize(1100, 720);
  addDockWidget(Qt::RightDockWidgetArea, cache_panel_);
  cache_panel_->hide();
  connectWorker();
  connectWidgets();
  buildMenus();
  controller_.listSessions(QString());  // the worker may have listed before we connected
  if (!model_dir.isEmpty()) loadModel(model_dir);
  if (app_settings_.serve) serve_action_->setChecked(true);  // starts once the model is loaded
}

QWidget* MainWindow::buildChatPane() {
  auto* pane = new QWidget;
  show_prompt_ = new QPushButton(tr("Show prompt"));
  show_prompt_->setObjectName(QStringLiteral("showPrompt"));
  show_prompt_->setAccessibleName(tr("Show the prompt sent to the model"));
  effort_line_->setObjectName(QStringLiteral("effortLine"));
  effort_line_->setAccessibleName(tr("Reasoning effort line sent to the model"));
  effort_line_->setWordWrap(true);
  regenerate_->setAccessibleName(tr("Regenerate the last answer"));
  regenerate_->setObjectName(QStringLiteral("regenerate"));
  settings_->setObjectName(QStringLiteral("chatSettings"));
  settings_->setAccessibleName(tr("Chat settings: system prompt and sampling"));
  auto* controls = new QHBoxLayout;
  controls->addWidget(effort_, 1);
  controls->addWidget(settings_);
  controls->addWidget(regenerate_);
  auto* layout = new QVBoxLayout(pane);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view_, 1);
  layout->addLayout(controls);
  auto* sent = new QHBoxLayout;
  sent->addWidget(effort_line_, 1);
  sent->addWidget(show_prompt_);
  layout->addLayout(sent);
  layout->addWidget(composer_);
  return pane;
}

void MainWindow::connectWorker() {
  ChatWorker* w = controller_.worker();
  const auto queued = Qt::QueuedConnection;
  connect(
      w, &ChatWorker::storageFailed, this,
      [this](const QString& message) {
        composer_->showError(tr("The chat database could not be opened: %1").arg(message));
      },
      queued);
  connectModel();
  connect(w, &ChatWorker::sessionsListed, this, &MainWindow::onSessionsListed, queued);
  connect(
      w, &ChatWorker::sessionCreated, this,
      [this](qint64 id) {
        creating_session_ = false;
        openSession(id);
      },
      queued);
  connect(w, &ChatWorker::sessionOpened, this, &MainWindow::onSessionOpened, queued);
  connect(
      w, &ChatWorker::sessionDeleted, this,
      [this](qint64 id) {
        if (id != current_) return;
        current_ = 0;
        showEmptyChat(app_settings_.new_chat);
      },
      queued);
  connect(
      w, &ChatWorker::promptPreviewed, this,
      [this](qint64 id, const QString& line, const QString& prompt) {
        if (id != current_) return;
        prompt_preview_ = prompt;
        if (!generating_) showEffortLine(line, false);
      },
      queued);
  connect(
      w, &ChatWorker::userMessageStored, this,
      [this](qint64 id, const MessageRow& row) {
        if (id == current_) view_->addMessage(row);
      },
      queued);
  connect(
      w, &ChatWorker::answerStarted, this,
      [this](qint64 id) {
        streamed_chunks_ = 0;
        stream_started_ms_ = QDateTime::currentMSecsSinceEpoch();
        if (id == current_) view_->beginAnswer();
      },
      queued);
  connect(w, &ChatWorker::answerText, this, &MainWindow::onAnswerText, queued);
  connect(w, &ChatWorker::answerFinished, this, &MainWindow::onAnswerFinished, queued);
  connect(w, &ChatWorker::turnFailed, this, &MainWindow::onTurnFailed, queued);
  connect(w, &ChatWorker::cacheStatsReady, cache_panel_, &CachePanel::showStats, queued);
}

void MainWindow::connectWidgets() {
  connect(sidebar_, &SessionSidebar::newRequested, this, &MainWindow::newSession);
  connect(sidebar_, &SessionSidebar::sessionActivated, this, &MainWindow::openSession);
  connect(sidebar_, &SessionSidebar::deleteRequested, &controller_,
          [this](qint64 id) { controller_.deleteSession(id); });
  connect(sidebar_, &SessionSidebar::searchChanged, &controller_,
          [this](const QString& text) { controller_.listSessions(text); });
  connect(sidebar_->model(), &SessionListModel::renameRequested, &controller_,
          [this](qint64 id, const QString& title) { controller_.renameSession(id, title); });
  connect(effort_, &EffortControl::changed, this, [this] {
    if (current_ != 0) controller_.saveChoices(current_, currentChoices());
    requestPreview();
  });
  connect(settings_, &QPushButton::clicked, this, &MainWindow::editSettings);
  connect(composer_, &Composer::submitted, this, &MainWindow::submit);
  connect(composer_, &Composer::stopRequested, this, &MainWindow::stop);
  connect(regenerate_, &QPushButton::clicked, this, &MainWindow::regenerate);
  connect(show_prompt_, &QPushButton::clicked, this, &MainWindow::showPrompt);
  connect(cache_panel_, &CachePanel::refreshRequested, &controller_,
          [this] { controller_.refreshCacheStats(); });
}

QString MainWindow::modelError() const {
  return model_error_->isHidden() ? QString() : model_error_->text();
}
QString MainWindow::modelName() const {
  return model_name_->text();
}
QString MainWindow::effortLine() const {
  return effort_line_->text();
}
QString MainWindow::statusText() const {
  return status_->text();
}

SessionChoices MainWindow::currentChoices() const {
  SessionChoices c = choices_;
  c.effort = effort_->choices().effort;
  c.thinking = effort_->choices().thinking;
  return c;
}

void MainWindow::editSettings() {
  auto* dialog = new SessionSettingsDialog(currentChoices(), this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QDialog::accepted, this, [this, dialog] {
    choices_ = dialog->choices();
    if (current_ != 0) controller_.saveChoices(current_, currentChoices());
    requestPreview();
  });
  dialog->open();  // window-modal, not a nested event loop
}

void MainWindow::newSession() {
  // A new chat starts from the new-chat defaults (File ▸ Settings), effort and thinking included,
  // not from the chat shown before.
  const SessionChoices choices = app_settings_.new_chat;
  // The new chat is current at once: a message sent before the worker has made it waits for it
  // (pending_text_) instead of going to the chat shown before.
  if (generating_) stop();  // the answer keeps what it has
  current_ = 0;
  showEmptyChat(choices);
  if (creating_session_) return;
  creating_session_ = true;
  controller_.createSession(choices);
}

// What belongs to the chat shown before goes: its messages, its last turn's figures and prompt,
// and Regenerate (nothing to answer again yet).
void MainWindow::showEmptyChat(const SessionChoices& choices) {
  view_->clearMessages();
  choices_ = choices;
  effort_->setChoices(choices);
  sent_prompt_.clear();
  status_->clear();
  has_answer_ = false;
  regenerate_->setEnabled(false);
}

void MainWindow::openSession(qint64 id) {
  if (generating_ && id != current_) stop();  // the answer keeps what it has
  if (id != current_) status_->clear();       // the figures were the other chat's last turn
  current_ = id;
  sidebar_->select(id);
  controller_.openSession(id);
}

void MainWindow::submit(QString text, QStringList images) {
  if (generating_) return;
  last_text_ = text;
  last_images_ = images;
  composer_->clearMessage();
  if (current_ == 0) {  // the first message creates its session
    pending_text_ = text;
    pending_images_ = images;
    if (!creating_session_) {
      creating_session_ = true;
      controller_.createSession(currentChoices());
    }
  } else {
    controller_.send(current_, text, images, currentChoices());
  }
  setGenerating(true);
}

void MainWindow::regenerate() {
  if (generating_ || current_ == 0 || !has_answer_) return;
  controller_.regenerate(current_, currentChoices());
  setGenerating(true);
}

void MainWindow::stop() {
  if (generating_) controller_.stop();
}

void MainWindow::setGenerating(bool generating) {
  generating_ = generating;
  composer_->setGenerating(generating);
  regenerate_->setEnabled(!generating && has_answer_);
  if (generating) status_->setText(tr("Generating…"));
}

void MainWindow::onSessionsListed(const QList<SessionRow>& rows) {
  sidebar_->model()->setRows(rows);
  if (!listed_once_ && current_ == 0 && !rows.isEmpty()) openSession(rows.front().id);
  listed_once_ = true;
}

void MainWindow::onSessionOpened(qint64 id, SessionChoices choices,
                                 const QList<MessageRow>& messages) {
  if (id != current_) return;
  view_->clearMessages();
  sent_prompt_.clear();  // "Show prompt" shows the preview until this chat's next turn
  has_answer_ = false;
  for (const MessageRow& m : messages) {
    view_->addMessage(m);
    has_answer_ = has_answer_ || !m.from_user;
  }
  regenerate_->setEnabled(!generating_ && has_answer_);
  choices_ = choices;
  effort_->setChoices(choices);
  requestPreview();
  if (!pending_text_.isEmpty() || !pending_images_.isEmpty()) {
    controller_.send(id, pending_text_, pending_images_, currentChoices());
    pending_text_.clear();
    pending_images_.clear();
  }
}

void MainWindow::onAnswerText(qint64 session, bool thinking, const QString& text) {
  if (session != current_) return;
  view_->appendAnswerText(thinking, text);
  ++streamed_chunks_;
  const double seconds = (QDateTime::currentMSecsSinceEpoch() - stream_started_ms_) / 1000.0;
  if (seconds > 0.2)
    status_->setText(
        tr("Generating… about %1 tokens/s").arg(streamed_chunks_ / seconds, 0, 'f', 1));
}

void MainWindow::onAnswerFinished(qint64 session, const TurnStats& stats, const QString& finish,
                                  const QString& prompt) {
  if (session == current_) {
    view_->finishAnswer(finish_note(finish));
    has_answer_ = true;
  }
  setGenerating(false);
  status_->setText(stats_text(stats));
  sent_prompt_ = prompt;
  showEffortLine(QString::fromStdString(find_effort_line(prompt.toStdString())), true);
}

void MainWindow::showPrompt() {
  auto* dialog = new QDialog(this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->setObjectName(QStringLiteral("promptDialog"));
  const bool sent = !sent_prompt_.isEmpty();
  dialog->setWindowTitle(sent ? tr("Prompt sent to the model")
                              : tr("Prompt the next message sends"));
  auto* text = new QPlainTextEdit(sent ? sent_prompt_ : prompt_preview_, dialog);
  text->setObjectName(QStringLiteral("promptText"));
  text->setReadOnly(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, dialog);
  connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
  auto* layout = new QVBoxLayout(dialog);
  layout->addWidget(text);
  layout->addWidget(buttons);
  dialog->resize(640, 420);
  dialog->open();
}

void MainWindow::onTurnFailed(qint64 session, const QString& message) {
  composer_->showError(message);
  if (!generating_) return;
  setGenerating(false);
  status_->setText(tr("The turn failed"));
  if (session == current_) {
    view_->finishAnswer(tr("failed"));
    controller_.openSession(session);  // show what is stored: a refused turn stored nothing
  }
  if (composer_->edit()->toPlainText().isEmpty() && composer_->attachments().isEmpty()) {
    composer_->setText(last_text_);
    for (const QString& path : last_images_) composer_->addImageFile(path);
    composer_->showError(message);
  }
}

void MainWindow::showEffortLine(const QString& line, bool sent) {
  const QString prefix = sent ? tr("Sent: ") : tr("Will send: ");
  effort_line_->setText(line.isEmpty() ? prefix + tr("thinking off (no reasoning effort line)")
                                       : prefix + line);
}

void MainWindow::requestPreview() {
  if (model_ready_) controller_.previewPrompt(current_, currentChoices(), QString());
}

}  // namespace flashdesk::ui
