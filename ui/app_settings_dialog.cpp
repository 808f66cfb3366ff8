// The application settings dialog: spin boxes in GiB / MiB / hours / minutes over AppSettings'
// bytes and durations; the ranges are those load_app_settings accepts.
#include "ui/app_settings_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QThread>
#include <algorithm>
#include <cmath>

#include "engine/ops/cuda/cuda_devices.h"
#include "ui/session_settings_dialog.h"

namespace flashdesk::ui {

AppSettingsDialog::AppSettingsDialog(const AppSettings& settings, QWidget* parent)
    : QDialog(parent),
      base_(settings),
      data_dir_(new QLineEdit(settings.data_dir, this)),
      kv_budget_(new QDoubleSpinBox(this)),
      kv_retention_(new QSpinBox(this)),
      pool_budget_(new QSpinBox(this)),
      pool_ttl_(new QSpinBox(this)),
      backend_(new QComboBox(this)),
      threads_(new QSpinBox(this)),
      devices_(new QLabel(this)),
      server_port_(new QSpinBox(this)),
      server_host_(new QLineEdit(settings.server_host, this)),
      server_api_key_(new QLineEdit(settings.server_api_key, this)),
      server_problem_(new QLabel(this)),
      speculative_(new QComboBox(this)),
      new_chat_(new QPushButton(tr("Edit…"), this)),
      new_chat_summary_(new QLabel(this)) {
  setWindowTitle(tr("FlashDesk settings"));
  data_dir_->setPlaceholderText(tr("Default (~/.local/share/flashdesk, ~/.cache/flashdesk)"));
  data_dir_->setAccessibleName(tr("Data folder"));
  kv_budget_->setRange(0.25, 1 << 20);
  kv_budget_->setDecimals(2);
  kv_budget_->setSuffix(tr(" GiB"));
  kv_budget_->setValue(double(settings.kv_disk_budget_bytes) / double(kGiB));
  kv_budget_->setAccessibleName(tr("SSD space for the KV cache, in GiB"));
  kv_retention_->setRange(1, int(kMaxRetentionHours));
  kv_retention_->setSuffix(tr(" h"));
  kv_retention_->setValue(int(settings.kv_retention_hours));
  kv_retention_->setAccessibleName(tr("Keep unused KV blocks on the SSD for this many hours"));
  pool_budget_->setRange(0, 1 << 24);
  pool_budget_->setSuffix(tr(" MiB"));
  pool_budget_->setSpecialValueText(tr("Automatic (10% of RAM)"));
  pool_budget_->setValue(int(settings.window_pool_budget_bytes / kMiB));
  pool_budget_->setAccessibleName(tr("Memory for parked sliding windows, in MiB; 0 is automatic"));
  pool_ttl_->setRange(1, int(kMaxPoolTtlMinutes));
  pool_ttl_->setSuffix(tr(" min"));
  pool_ttl_->setValue(int(settings.window_pool_ttl_minutes));
  pool_ttl_->setAccessibleName(tr("Drop a parked window unused for this many minutes"));
  buildDeviceFields(settings);
  buildSpeculativeField(settings);
  server_port_->setRange(0, 65535);
  server_port_->setSpecialValueText(tr("Any free port"));
  server_port_->setValue(settings.server_port);
  server_port_->setAccessibleName(
      tr("Port of the API server on 127.0.0.1 (File ▸ Serve on localhost); 0 is any free port"));
  buildServerFields(settings);
  new_chat_->setAccessibleName(tr("Edit the system prompt and sampling of new chats"));
  connect(new_chat_, &QPushButton::clicked, this, &AppSettingsDialog::editNewChatDefaults);
  new_chat_summary_->setWordWrap(true);
  showNewChatSummary();

  auto* restart = new QLabel(
      tr("<i>The data folder and the cache sizes take effect after FlashDesk restarts; the backend "
         "and threads at the next model load (File ▸ Open model folder… or Reload the model, "
         "F5); the API server's address, port and key the next time serving is switched "
         "on.</i>"),
      this);
  restart->setWordWrap(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* form = new QFormLayout(this);
  form->addRow(tr("Data folder"), buildDataDirRow());
  form->addRow(tr("SSD KV cache size"), kv_budget_);
  form->addRow(tr("Keep SSD KV blocks for"), kv_retention_);
  form->addRow(tr("Window pool size"), pool_budget_);
  form->addRow(tr("Keep parked windows for"), pool_ttl_);
  form->addRow(tr("Compute backend"), backend_);
  form->addRow(tr("CPU threads"), threads_);
  form->addRow(tr("Devices"), devices_);
  form->addRow(tr("Speculative decoding (DSpark)"), speculative_);
  form->addRow(tr("API server address"), server_host_);
  form->addRow(tr("API server port"), server_port_);
  form->addRow(tr("API key"), server_api_key_);
  form->addRow(server_problem_);
  // The summary gets a row of its own, the dialog's full width: beside the button, a wrapped
  // label in a nested layout was given one line's height and cut.
  form->addRow(tr("New chats"), new_chat_);
  form->addRow(new_chat_summary_);
  form->addRow(restart);
  form->addRow(buttons);
}

void AppSettingsDialog::buildServerFields(const AppSettings& settings) {
  server_host_->setObjectName(QStringLiteral("serverHost"));
  server_host_->setAccessibleName(
      tr("Address the API server listens on (File ▸ Serve on localhost); anything but 127.0.0.1 "
         "needs an API key"));
  server_port_->setRange(0, 65535);
  server_port_->setSpecialValueText(tr("Any free port"));
  server_port_->setValue(settings.server_port);
  server_port_->setAccessibleName(
      tr("Port of the API server (File ▸ Serve on localhost); 0 is any free port"));
  server_api_key_->setObjectName(QStringLiteral("serverApiKey"));
  server_api_key_->setEchoMode(QLineEdit::PasswordEchoOnEdit);
  server_api_key_->setPlaceholderText(tr("None (loopback only)"));
  server_api_key_->setAccessibleName(
      tr("API key clients must send as Authorization: Bearer KEY; kept in plain text in the "
         "settings file"));
  server_api_key_->setToolTip(server_api_key_->accessibleName());
  server_problem_->setObjectName(QStringLiteral("serverProblem"));
  server_problem_->setWordWrap(true);
  server_problem_->hide();
}

void AppSettingsDialog::accept() {
  const QString problem = server_settings_problem(server_host_->text(), server_api_key_->text());
  server_problem_->setText(problem);
  server_problem_->setVisible(!problem.isEmpty());
  if (problem.isEmpty()) QDialog::accept();
}

// The choices come from the backend factory, so a machine with a GPU lists it (name and memory from
// the CUDA runtime); without one the dialog says why (no GPU, no driver, or no CUDA backend in
// this build) rather than offering a device it cannot use.
void AppSettingsDialog::buildDeviceFields(const AppSettings& settings) {
  const QStringList choices = backend_choices();
  backend_->addItems(choices);
  backend_->setCurrentIndex(std::max<qsizetype>(0, choices.indexOf(settings.backend)));
  backend_->setAccessibleName(tr("Compute backend of the next model load"));
  const int cores = QThread::idealThreadCount();
  threads_->setRange(0, kMaxThreads);
  threads_->setSpecialValueText(tr("All cores (%1)").arg(cores));
  threads_->setValue(settings.threads);
  threads_->setAccessibleName(tr("CPU threads of the next model load; 0 is every core"));
  QString gpus;
  for (const CudaDeviceInfo& g : cuda_devices())
    gpus += QStringLiteral("; cuda:%1 %2").arg(g.index).arg(QString::fromStdString(describe(g)));
  if (gpus.isEmpty())
    gpus = tr("; no GPU: %1").arg(QString::fromStdString(cuda_unavailable_reason()));
  devices_->setText(tr("CPU, %1 cores").arg(cores) + gpus);
  devices_->setWordWrap(true);
  devices_->setAccessibleName(tr("Devices this build can run on"));
}

// Automatic is the default: on where the head was measured to pay (a GPU), off on the CPU.
void AppSettingsDialog::buildSpeculativeField(const AppSettings& settings) {
  speculative_->setObjectName(QStringLiteral("speculativeDecoding"));
  speculative_->addItem(tr("Automatic (on with a GPU)"), int(SpeculativeChoice::kAuto));
  speculative_->addItem(tr("On"), int(SpeculativeChoice::kOn));
  speculative_->addItem(tr("Off"), int(SpeculativeChoice::kOff));
  speculative_->setCurrentIndex(speculative_->findData(int(settings.speculative)));
  speculative_->setAccessibleName(
      tr("Speculative decoding with the model's DSpark draft head, from the next answer: "
         "automatic, on or off"));
  setDraftHead(false, tr("No model is loaded: the choice needs a model with a DSpark draft head"));
}

QWidget* AppSettingsDialog::buildDataDirRow() {
  auto* row = new QWidget(this);
  auto* browse = new QPushButton(tr("Choose…"), row);
  browse->setAccessibleName(tr("Choose the data folder"));
  connect(browse, &QPushButton::clicked, this, &AppSettingsDialog::chooseDataDir);
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(data_dir_, 1);
  layout->addWidget(browse);
  return row;
}

void AppSettingsDialog::chooseDataDir() {
  const QString dir =
      QFileDialog::getExistingDirectory(this, tr("Choose the data folder"), data_dir_->text());
  if (!dir.isEmpty()) data_dir_->setText(dir);
}

void AppSettingsDialog::editNewChatDefaults() {
  auto* dialog =
      new SessionSettingsDialog(base_.new_chat, this, SessionSettingsDialog::Scope::new_chats);
  dialog->setWindowTitle(tr("New chat settings"));
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QDialog::accepted, this,
          [this, dialog] { setNewChatDefaults(dialog->choices()); });
  dialog->open();
}

void AppSettingsDialog::setDraftHead(bool available, const QString& why_not,
                                     const QString& backend) {
  speculative_->setEnabled(available);
  if (!available) return speculative_->setToolTip(why_not);
  // On the CPU backends flash-tiny's head decodes no faster than plain decoding (docs/dspark.md
  // "Default"), so the tooltip says what to expect rather than promising a speed-up.
  const bool automatic_on =
      speculative_enabled(SpeculativeChoice::kAuto, true, backend.toStdString());
  const QString automatic =
      automatic_on ? tr("Automatic is on for this model: it runs on the GPU (%1).").arg(backend)
                   : tr("Automatic is off for this model: it runs on %1, where DSpark decodes "
                        "slower than plain decoding.")
                         .arg(backend.isEmpty() ? tr("the CPU") : backend);
  speculative_->setToolTip(tr("The draft head proposes tokens that the model checks in one step; "
                              "the answers are the same (greedy) or sampled from the same "
                              "distribution. It pays on a weight-bound backend (a GPU), not on "
                              "the CPU for small models. ") +
                           automatic);
}

void AppSettingsDialog::setNewChatDefaults(const SessionChoices& choices) {
  base_.new_chat = choices;
  showNewChatSummary();
}

void AppSettingsDialog::showNewChatSummary() {
  const SessionChoices& c = base_.new_chat;
  const QString prompt = c.system_prompt.isEmpty()
                             ? tr("no system prompt")
                             : tr("system prompt \"%1\"").arg(c.system_prompt.left(40));
  const QString thinking =
      c.thinking ? tr("thinking at effort %1").arg(c.effort) : tr("thinking off");
  new_chat_summary_->setText(tr("%1, temperature %2, top-p %3, %4")
                                 .arg(thinking)
                                 .arg(c.temperature, 0, 'f', 2)
                                 .arg(c.top_p, 0, 'f', 2)
                                 .arg(prompt));
  new_chat_summary_->setToolTip(c.system_prompt);
}

AppSettings AppSettingsDialog::settings() const {
  AppSettings s = base_;
  s.data_dir = data_dir_->text().trimmed();
  // The spin box shows GiB to two decimals: an untouched box keeps the stored bytes exactly.
  const double shown = kv_budget_->valueFromText(
      kv_budget_->textFromValue(double(base_.kv_disk_budget_bytes) / double(kGiB)));
  if (kv_budget_->value() != shown)
    s.kv_disk_budget_bytes = uint64_t(std::llround(kv_budget_->value() * double(kGiB)));
  s.kv_retention_hours = kv_retention_->value();
  if (uint64_t(pool_budget_->value()) != base_.window_pool_budget_bytes / kMiB)
    s.window_pool_budget_bytes = uint64_t(pool_budget_->value()) * kMiB;
  s.window_pool_ttl_minutes = pool_ttl_->value();
  s.backend = backend_->currentText();
  s.threads = threads_->value();
  s.server_port = server_port_->value();
  s.server_host = server_host_->text().trimmed();
  s.server_api_key = server_api_key_->text();
  s.speculative = SpeculativeChoice(speculative_->currentData().toInt());
  return s;
}

}  // namespace flashdesk::ui
