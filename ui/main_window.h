// The FlashDesk window: model bar, session sidebar, conversation, effort controls, composer and
// status line. Thin: it forwards user actions to the ChatController and shows what the worker
// reports; it holds only which session is shown and whether an answer is being written.
#pragma once

#include <QMainWindow>
#include <QStringList>
#include <optional>

#include "ui/app_settings.h"
#include "ui/chat_controller.h"
#include "ui/remote_entries.h"

class QAction;
class QActionGroup;
class QLabel;
class QMenu;
class QSettings;
class QProgressBar;
class QPushButton;

namespace flashdesk::ui {

class AppSettingsDialog;
class CachePanel;
class Composer;
class EffortControl;
class MessageView;
class RemoteModelDialog;
class SessionSidebar;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // Loads `model_dir` at once when it is not empty. With `settings`, the app settings are read
  // from it (new-chat defaults, theme: applied now) and saved to it when edited; without, the
  // defaults are used and nothing is saved.
  MainWindow(ChatController& controller, const QString& model_dir, QSettings* settings = nullptr,
             QWidget* parent = nullptr);

  qint64 currentSession() const { return current_; }
  bool generating() const { return generating_; }
  Composer* composer() const { return composer_; }
  EffortControl* effortControl() const { return effort_; }
  MessageView* messageView() const { return view_; }
  SessionSidebar* sidebar() const { return sidebar_; }
  QString modelError() const;
  QString modelName() const;
  QString effortLine() const;
  QString statusText() const;
  QString promptPreview() const { return prompt_preview_; }  // the next turn's prompt, as text
  // The prompt the last turn of the shown chat tokenised, as text; empty before a turn.
  QString sentPrompt() const { return sent_prompt_; }
  SessionChoices currentChoices() const;
  const AppSettings& appSettings() const { return app_settings_; }
  CachePanel* cachePanel() const { return cache_panel_; }
  QAction* themeAction(ThemeChoice choice) const;
  QProgressBar* modelProgress() const { return model_progress_; }
  QString storageWarning() const;  // the latest storage failure shown, empty when none
  QAction* serveAction() const { return serve_action_; }  // File ▸ Serve on localhost
  // "Serving NAME on URL" while the API server runs; empty when it does not.
  QString serverStatus() const;
  // The note that KV persistence does not apply, shown while a remote model is loaded.
  QString remoteNote() const;

 public slots:
  void openModelFolder();
  void loadModel(const QString& directory);
  void reloadModel();  // the last model folder again, with the current backend and threads
  void newSession();
  void openSession(qint64 id);
  void submit(QString text, QStringList images);  // copies: the composer clears its own
  void regenerate();
  void stop();
  void editSettings();                   // the session's system prompt, sampling and answer length
  AppSettingsDialog* editAppSettings();  // opens the dialog (window-modal); returns it
  void applyAppSettings(const AppSettings& settings);  // saves; new-chat defaults apply now
  void setTheme(ThemeChoice choice);                   // applies and saves
  // The API server on 127.0.0.1 at the settings' port; the switch state is saved.
  void setServing(bool on);
  RemoteModelDialog* addRemoteModel();           // opens the dialog (window-modal); returns it
  void connectRemote(const RemoteEntry& entry);  // remembered, then loaded as the model

 private:
  QWidget* buildModelBar();
  void connectModel();
  void showStorageWarning(qint64 session, const QString& message);
  QWidget* buildChatPane();
  void connectWorker();
  void connectWidgets();
  void buildMenus();
  void buildViewMenu();
  void buildHelpMenu();
  void buildServeAndRemote(QMenu* file);
  void connectServing();
  void fillRemoteMenu();
  void showAbout();
  void showPaletteKind();
  void setGenerating(bool generating);
  void onSessionsListed(const QList<SessionRow>& rows);
  void onSessionOpened(qint64 id, SessionChoices choices, const QList<MessageRow>& messages);
  void onAnswerText(qint64 session, bool thinking, const QString& text);
  void onAnswerFinished(qint64 session, const TurnStats& stats, const QString& finish,
                        const QString& prompt);
  void showEmptyChat(const SessionChoices& choices);
  void showPrompt();  // the sent prompt (or the preview before a turn) in a read-only dialog
  void onTurnFailed(qint64 session, const QString& message);
  void showEffortLine(const QString& line, bool sent);
  void requestPreview();

 protected:
  void changeEvent(QEvent* event) override;

 private:
  ChatController& controller_;
  SessionSidebar* sidebar_;
  MessageView* view_;
  EffortControl* effort_;
  Composer* composer_;
  QLabel* model_name_;
  QLabel* model_error_;
  QProgressBar* model_progress_;
  QLabel* storage_warning_;
  QLabel* remote_note_;
  QLabel* server_status_;
  QAction* serve_action_ = nullptr;
  QMenu* remote_menu_ = nullptr;
  std::optional<RemoteEntry> remote_;  // the remote model last asked for (reloadModel)
  QString model_dir_;                  // the folder last asked for (reloadModel)
  QString model_label_;                // the loaded model's name ("" before one is loaded)
  QString model_backend_;              // and the backend it runs on
  bool model_draft_head_ = false;      // its DSpark draft head loaded (the settings' switch)
  QLabel* effort_line_;
  QPushButton* regenerate_;
  QPushButton* settings_;
  QLabel* status_;
  CachePanel* cache_panel_;
  QActionGroup* themes_;
  QSettings* settings_store_;
  AppSettings app_settings_;
  SessionChoices choices_;  // of the shown session; effort and thinking live in effort_
  QString prompt_preview_;
  QString sent_prompt_;
  QPushButton* show_prompt_;
  qint64 current_ = 0;
  bool generating_ = false;
  bool listed_once_ = false;
  bool creating_session_ = false;  // a createSession is on its way to the worker
  bool model_ready_ = false;
  bool has_answer_ = false;  // the shown chat has an answer Regenerate can replace
  QString pending_text_;     // a message typed before its session existed
  QStringList pending_images_;
  QString last_text_;  // put back into the composer when a turn is refused
  QStringList last_images_;
  int streamed_chunks_ = 0;
  qint64 stream_started_ms_ = 0;
};

}  // namespace flashdesk::ui
