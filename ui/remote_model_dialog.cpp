// The remote model dialog: fields, the /v1/models query on a thread of its own, the KV note.
#include "ui/remote_model_dialog.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPointer>
#include <QPushButton>
#include <QThread>

#include "app/remote/remote_chat.h"
#include "ui/theme.h"

namespace flashdesk::ui {

QString RemoteModelDialog::kvNote() {
  return tr(
      "A remote model runs on its server. Your chats, pictures, effort and history are kept "
      "on this computer as usual, but KV persistence and fast resume do not apply: nothing "
      "of the model's cache is saved here, and each turn resends the conversation for the "
      "server to compute (or find in its own cache).");
}

RemoteModelDialog::RemoteModelDialog(const RemoteEntry& shown, QWidget* parent)
    : QDialog(parent),
      url_(new QLineEdit(shown.url, this)),
      api_key_(new QLineEdit(shown.api_key, this)),
      model_(new QComboBox(this)),
      list_(new QPushButton(tr("List models"), this)),
      list_status_(new QLabel(this)) {
  setWindowTitle(tr("Add a remote model"));
  url_->setPlaceholderText(QStringLiteral("http://gpu-box:8000/v1"));
  url_->setAccessibleName(tr("Endpoint URL of the OpenAI-compatible API"));
  api_key_->setEchoMode(QLineEdit::Password);
  api_key_->setPlaceholderText(tr("none"));
  api_key_->setAccessibleName(tr("API key (optional; stored in the settings file)"));
  model_->setEditable(true);
  model_->setEditText(shown.model);
  model_->setAccessibleName(tr("Model id as the endpoint lists it"));
  list_->setAccessibleName(tr("List the endpoint's models"));
  list_status_->setObjectName(QStringLiteral("remoteListStatus"));
  list_status_->setWordWrap(true);
  connect(list_, &QPushButton::clicked, this, &RemoteModelDialog::listModels);
  connect(this, &RemoteModelDialog::modelsListed, this, &RemoteModelDialog::showModels);
  auto* note = new QLabel(kvNote(), this);
  note->setObjectName(QStringLiteral("remoteKvNote"));
  note->setWordWrap(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  ok_ = buttons->button(QDialogButtonBox::Ok);
  ok_->setText(tr("Connect"));
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(url_, &QLineEdit::textChanged, this, &RemoteModelDialog::updateOk);
  connect(model_, &QComboBox::editTextChanged, this, &RemoteModelDialog::updateOk);
  auto* model_row = new QHBoxLayout;
  model_row->addWidget(model_, 1);
  model_row->addWidget(list_);
  auto* form = new QFormLayout(this);
  form->addRow(tr("URL"), url_);
  form->addRow(tr("API key"), api_key_);
  form->addRow(tr("Model"), model_row);
  form->addRow(list_status_);
  form->addRow(note);
  form->addRow(buttons);
  updateOk();
}

RemoteEntry RemoteModelDialog::entry() const {
  return {url_->text().trimmed(), api_key_->text(), model_->currentText().trimmed()};
}

void RemoteModelDialog::updateOk() {
  const RemoteEntry e = entry();
  ok_->setEnabled(!e.url.isEmpty() && !e.model.isEmpty());
}

// The query runs on a thread of its own (a slow or unreachable endpoint takes up to the connect
// timeout); its answer comes back as a queued signal, and is dropped if the dialog is gone.
void RemoteModelDialog::listModels() {
  list_->setEnabled(false);
  list_status_->setText(tr("Asking %1 for its models…").arg(url_->text().trimmed()));
  const RemoteEntry e = entry();
  QPointer<RemoteModelDialog> self(this);
  QThread* thread = QThread::create([self, e] {
    QStringList ids;
    QString error;
    try {
      for (const std::string& id : remote::list_models(
               {.url = e.url.toStdString(), .api_key = e.api_key.toStdString(), .model = {}}))
        ids << QString::fromStdString(id);
    } catch (const std::exception& ex) {
      error = QString::fromUtf8(ex.what());
    }
    QMetaObject::invokeMethod(
        QCoreApplication::instance(),
        [self, ids, error] {
          if (self) emit self->modelsListed(ids, error);
        },
        Qt::QueuedConnection);
  });
  connect(thread, &QThread::finished, thread, &QObject::deleteLater);
  thread->start();
}

void RemoteModelDialog::showModels(const QStringList& ids, const QString& error) {
  list_->setEnabled(true);
  if (!error.isEmpty()) {
    show_as_error(list_status_);
    list_status_->setText(error);
    return;
  }
  list_status_->setPalette(QPalette());
  list_status_->setText(tr("%n model(s) listed", "", int(ids.size())));
  const QString typed = model_->currentText().trimmed();
  model_->clear();
  model_->addItems(ids);
  model_->setEditText(ids.contains(typed) ? typed : ids.front());
}

}  // namespace flashdesk::ui
