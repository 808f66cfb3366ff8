// The window's connections beyond its own model folder: File ▸ Serve on localhost (the
// OpenAI-compatible API on the loaded model, its URL in the status bar) and File ▸ Remote models
// (a model served elsewhere, chatted with like a local one).
#include <QAction>
#include <QLabel>
#include <QMenu>
#include <QStatusBar>

#include "ui/main_window.h"
#include "ui/remote_model_dialog.h"

namespace flashdesk::ui {

void MainWindow::buildServeAndRemote(QMenu* file) {
  remote_menu_ = file->addMenu(tr("Re&mote models"));
  remote_menu_->setObjectName(QStringLiteral("remoteModels"));
  connect(remote_menu_, &QMenu::aboutToShow, this, &MainWindow::fillRemoteMenu);
  fillRemoteMenu();
  serve_action_ = file->addAction(tr("Ser&ve on localhost"));
  serve_action_->setObjectName(QStringLiteral("serveOnLocalhost"));
  serve_action_->setCheckable(true);
  serve_action_->setToolTip(
      tr("Serve the loaded model to other programs over the OpenAI-compatible API, on 127.0.0.1 "
         "unless File ▸ Settings names another address (which needs an API key)"));
  connect(serve_action_, &QAction::toggled, this, &MainWindow::setServing);
  connectServing();
}

// The saved entries, most recent first, then the command that adds one.
void MainWindow::fillRemoteMenu() {
  remote_menu_->clear();
  if (settings_store_)
    for (const RemoteEntry& entry : load_remote_entries(*settings_store_))
      remote_menu_->addAction(entry.label(), this, [this, entry] { connectRemote(entry); });
  if (!remote_menu_->isEmpty()) remote_menu_->addSeparator();
  remote_menu_->addAction(tr("&Add a remote model…"), this, &MainWindow::addRemoteModel);
}

RemoteModelDialog* MainWindow::addRemoteModel() {
  RemoteEntry shown;
  if (settings_store_) {
    const QList<RemoteEntry> saved = load_remote_entries(*settings_store_);
    if (!saved.isEmpty()) shown = {saved.front().url, saved.front().api_key, {}};
  }
  auto* dialog = new RemoteModelDialog(shown, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QDialog::accepted, this, [this, dialog] { connectRemote(dialog->entry()); });
  dialog->open();
  return dialog;
}

void MainWindow::connectRemote(const RemoteEntry& entry) {
  if (settings_store_) remember_remote_entry(*settings_store_, entry);
  remote_ = entry;
  controller_.connectRemote(entry.url, entry.api_key, entry.model);
}

void MainWindow::setServing(bool on) {
  app_settings_.serve = on;
  if (settings_store_) save_app_settings(*settings_store_, app_settings_);
  controller_.setServing(on, app_settings_.server_port, app_settings_.server_host,
                         app_settings_.server_api_key);
  if (on && !model_ready_) status_->setText(tr("The API server starts once the model is loaded"));
}

void MainWindow::connectServing() {
  ChatWorker* w = controller_.worker();
  const auto queued = Qt::QueuedConnection;
  connect(
      w, &ChatWorker::servingStarted, this,
      [this](const QString& url, const QString& model) {
        server_status_->setText(tr("Serving %1 on %2").arg(model, url));
        server_status_->setToolTip(
            tr("OpenAI-compatible API: base_url %1, model \"%2\"").arg(url, model));
        server_status_->show();
      },
      queued);
  connect(
      w, &ChatWorker::servingStopped, this, [this] { server_status_->hide(); }, queued);
  // The switch goes off with the reason (a port in use, a remote model): it shows what runs.
  connect(
      w, &ChatWorker::servingFailed, this,
      [this](const QString& message) {
        server_status_->hide();
        const QSignalBlocker quiet(serve_action_);
        serve_action_->setChecked(false);
        app_settings_.serve = false;
        if (settings_store_) save_app_settings(*settings_store_, app_settings_);
        status_->setText(tr("Could not serve on localhost: %1").arg(message));
      },
      queued);
}

QString MainWindow::serverStatus() const {
  return server_status_->isHidden() ? QString() : server_status_->text();
}

QString MainWindow::remoteNote() const {
  return remote_note_->isHidden() ? QString() : remote_note_->text();
}

}  // namespace flashdesk::ui
