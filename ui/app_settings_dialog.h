// The application settings dialog (File ▸ Settings…): data folder, SSD KV budget and retention,
// window-pool budget and lifetime, compute backend and CPU threads, DSpark speculative decoding,
// the API server's address, port and key (a non-loopback address is refused without a key, as by
// `flashdesk-cli serve`), and the defaults of a new chat (edited in the per-session
// SessionSettingsDialog, not duplicated here). It edits an AppSettings value; the window saves it.
#pragma once

#include <QDialog>

#include "ui/app_settings.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace flashdesk::ui {

class AppSettingsDialog : public QDialog {
  Q_OBJECT

 public:
  AppSettingsDialog(const AppSettings& settings, QWidget* parent = nullptr);

  // The shown settings with the edited fields (the theme passes through: the View menu sets it).
  AppSettings settings() const;
  void setNewChatDefaults(const SessionChoices& choices);
  // Offers the DSpark choice (Automatic, On, Off) when the loaded model's draft head loaded; its
  // tooltip says what Automatic does on `backend`, the loaded model's. Else it stays disabled
  // (keeping the stored choice) with `why_not` as its tooltip.
  void setDraftHead(bool available, const QString& why_not, const QString& backend = QString());

  QLineEdit* dataDir() const { return data_dir_; }
  QDoubleSpinBox* kvDiskBudgetGiB() const { return kv_budget_; }
  QSpinBox* kvRetentionHours() const { return kv_retention_; }
  QSpinBox* windowPoolBudgetMiB() const { return pool_budget_; }
  QSpinBox* windowPoolTtlMinutes() const { return pool_ttl_; }
  QComboBox* backend() const { return backend_; }
  QSpinBox* threads() const { return threads_; }
  QLabel* devices() const { return devices_; }  // what the build can run on
  QSpinBox* serverPort() const { return server_port_; }
  // Automatic, On, Off; each item's data is its SpeculativeChoice as an int.
  QComboBox* speculative() const { return speculative_; }
  QLineEdit* serverHost() const { return server_host_; }
  QLineEdit* serverApiKey() const { return server_api_key_; }
  QLabel* serverProblem() const { return server_problem_; }  // why OK was refused

 public slots:
  // Refused (the dialog stays open, serverProblem() says why) while the API server's address
  // needs a key it lacks.
  void accept() override;
  QPushButton* newChatDefaultsButton() const { return new_chat_; }
  QLabel* newChatSummary() const { return new_chat_summary_; }

 private:
  QWidget* buildDataDirRow();
  void buildServerFields(const AppSettings& settings);
  void buildDeviceFields(const AppSettings& settings);
  void buildSpeculativeField(const AppSettings& settings);
  void chooseDataDir();
  void editNewChatDefaults();
  void showNewChatSummary();

  AppSettings base_;
  QLineEdit* data_dir_;
  QDoubleSpinBox* kv_budget_;
  QSpinBox* kv_retention_;
  QSpinBox* pool_budget_;
  QSpinBox* pool_ttl_;
  QComboBox* backend_;
  QSpinBox* threads_;
  QLabel* devices_;
  QSpinBox* server_port_;
  QLineEdit* server_host_;
  QLineEdit* server_api_key_;
  QLabel* server_problem_;
  QComboBox* speculative_;
  QPushButton* new_chat_;
  QLabel* new_chat_summary_;
};

}  // namespace flashdesk::ui
