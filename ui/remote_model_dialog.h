// The dialog that adds a remote model (File ▸ Remote models ▸ Add a remote model…): the
// endpoint's URL, an optional API key and the model id, which "List models" fills from the
// endpoint's /v1/models (asked on a thread of its own, so the window never waits for the network).
// It says plainly what a remote model does not have: KV persistence and fast resume.
#pragma once

#include <QDialog>

#include "ui/remote_entries.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace flashdesk::ui {

class RemoteModelDialog : public QDialog {
  Q_OBJECT

 public:
  explicit RemoteModelDialog(const RemoteEntry& shown, QWidget* parent = nullptr);

  RemoteEntry entry() const;
  QLineEdit* url() const { return url_; }
  QLineEdit* apiKey() const { return api_key_; }
  QComboBox* model() const { return model_; }
  QPushButton* listButton() const { return list_; }
  QLabel* listStatus() const { return list_status_; }  // the models found, or why none
  // The note on what a remote model does not keep.
  static QString kvNote();

 public slots:
  void listModels();  // asks the endpoint; the answer fills the model list

 signals:
  void modelsListed(const QStringList& ids, const QString& error);

 private:
  void showModels(const QStringList& ids, const QString& error);
  void updateOk();

  QLineEdit* url_;
  QLineEdit* api_key_;
  QComboBox* model_;
  QPushButton* list_;
  QLabel* list_status_;
  QPushButton* ok_;
};

}  // namespace flashdesk::ui
