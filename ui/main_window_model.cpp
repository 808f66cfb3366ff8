// The window's model bar and what it reports: loading a model folder with a percentage, the
// backend it runs on (or the endpoint of a remote model, with the note that its KV is not kept),
// reloading it with the device of the settings, and the storage warnings of the persistent sessions
// (disk full while spilling KV blocks or logging an answer).
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTime>

#include "ui/main_window.h"
#include "ui/message_view.h"
#include "ui/remote_model_dialog.h"
#include "ui/theme.h"
#include "ui/welcome_text.h"

namespace flashdesk::ui {

namespace {

constexpr int kProgressSteps = 1000;  // the worker reports per-mille steps

}  // namespace

QWidget* MainWindow::buildModelBar() {
  auto* bar = new QWidget;
  auto* open = new QPushButton(tr("Open model folder…"));
  open->setAccessibleName(tr("Open a model folder"));
  connect(open, &QPushButton::clicked, this, &MainWindow::openModelFolder);
  model_name_->setText(tr("No model loaded"));
  model_name_->setAccessibleName(tr("Model"));
  model_progress_->setObjectName(QStringLiteral("modelProgress"));
  model_progress_->setAccessibleName(tr("Model loading progress"));
  model_progress_->setFormat(QStringLiteral("%p%"));
  model_progress_->setMaximumWidth(160);
  model_progress_->hide();
  model_error_->setObjectName(QStringLiteral("modelError"));
  show_as_error(model_error_);
  model_error_->setWordWrap(true);
  model_error_->hide();
  storage_warning_->setObjectName(QStringLiteral("storageWarning"));
  storage_warning_->setAccessibleName(tr("Storage warning"));
  show_as_error(storage_warning_);
  storage_warning_->hide();
  remote_note_->setObjectName(QStringLiteral("remoteNote"));
  remote_note_->setAccessibleName(tr("Remote model note"));
  remote_note_->setText(tr("Remote: KV persistence and fast resume do not apply"));
  remote_note_->setToolTip(RemoteModelDialog::kvNote());
  remote_note_->hide();
  auto* layout = new QHBoxLayout(bar);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(model_name_);
  layout->addWidget(remote_note_);
  layout->addWidget(model_progress_);
  layout->addWidget(model_error_, 1);
  layout->addStretch();
  layout->addWidget(open);
  return bar;
}

void MainWindow::connectModel() {
  ChatWorker* w = controller_.worker();
  const auto queued = Qt::QueuedConnection;
  connect(
      w, &ChatWorker::modelLoading, this,
      [this](const QString& dir) {
        model_ready_ = false;
        model_name_->setText(tr("Loading %1…").arg(dir));
        model_progress_->setRange(0, 0);  // busy until the weights start coming in
        model_progress_->show();
        model_error_->hide();
      },
      queued);
  connect(
      w, &ChatWorker::modelProgress, this,
      [this](qint64 done, qint64 total) {
        model_progress_->setRange(0, kProgressSteps);
        model_progress_->setValue(total > 0 ? int(done * kProgressSteps / total) : kProgressSteps);
      },
      queued);
  connect(
      w, &ChatWorker::draftHeadKnown, this,
      [this](bool available) { model_draft_head_ = available; }, queued);
  connect(
      w, &ChatWorker::modelLoaded, this,
      [this](const QString& name, const QString& dir, const QString& backend) {
        model_ready_ = true;
        model_label_ = name;
        model_backend_ = backend;
        const bool remote = backend == QLatin1String(kRemoteBackend);
        model_name_->setText(remote ? tr("Model: %1 (remote, %2)").arg(name, dir)
                                    : tr("Model: %1 (%2)").arg(name, backend));
        model_name_->setToolTip(dir);
        remote_note_->setVisible(remote);
        if (!remote) remote_.reset();  // a failed switch kept the local model: F5 reloads it
        model_progress_->hide();
        view_->setEmptyText(welcome_text(name));
        requestPreview();
      },
      queued);
  connect(
      w, &ChatWorker::modelFailed, this,
      [this](const QString& dir, const QString& message) {
        model_name_->setText(tr("No model loaded"));
        remote_note_->hide();
        model_progress_->hide();
        model_error_->setText(tr("Could not load the model: %1").arg(message));
        model_error_->setToolTip(dir);
        model_error_->show();
      },
      queued);
  connect(w, &ChatWorker::storageWarning, this, &MainWindow::showStorageWarning, queued);
}

void MainWindow::openModelFolder() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a model folder"));
  if (!dir.isEmpty()) loadModel(dir);
}

void MainWindow::loadModel(const QString& directory) {
  model_dir_ = directory;
  remote_.reset();
  controller_.loadModel(directory);
}

// The remote model when one was chosen last (connected again), else the model folder.
void MainWindow::reloadModel() {
  if (remote_) return connectRemote(*remote_);
  if (!model_dir_.isEmpty()) loadModel(model_dir_);
}

// Kept in the status bar until the app closes: the chat went on, but the answers or the KV cache
// may be missing from the disk, which the user should know before relying on a restart.
void MainWindow::showStorageWarning(qint64 /*session*/, const QString& message) {
  storage_warning_->setText(
      tr("Storage problem at %1: %2").arg(QTime::currentTime().toString("HH:mm"), message));
  storage_warning_->setToolTip(message);
  storage_warning_->show();
}

QString MainWindow::storageWarning() const {
  return storage_warning_->isHidden() ? QString() : storage_warning_->text();
}

}  // namespace flashdesk::ui
