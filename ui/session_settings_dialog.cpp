// The per-session settings dialog; the ranges are those SessionSettings::validate accepts.
#include "ui/session_settings_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QPlainTextEdit>
#include <QSpinBox>

namespace flashdesk::ui {

SessionSettingsDialog::SessionSettingsDialog(const SessionChoices& choices, QWidget* parent,
                                             Scope scope)
    : QDialog(parent),
      base_(choices),
      system_prompt_(new QPlainTextEdit(choices.system_prompt, this)),
      temperature_(new QDoubleSpinBox(this)),
      top_p_(new QDoubleSpinBox(this)),
      max_new_tokens_(new QSpinBox(this)) {
  setWindowTitle(tr("Chat settings"));
  system_prompt_->setPlaceholderText(tr("No system prompt"));
  system_prompt_->setAccessibleName(tr("System prompt"));
  temperature_->setRange(0.0, 2.0);
  temperature_->setSingleStep(0.1);
  temperature_->setValue(choices.temperature);
  temperature_->setAccessibleName(tr("Temperature (0 picks the most likely token)"));
  top_p_->setRange(0.01, 1.0);
  top_p_->setSingleStep(0.05);
  top_p_->setValue(choices.top_p);
  top_p_->setAccessibleName(tr("Top-p"));
  max_new_tokens_->setRange(1, 1 << 20);
  max_new_tokens_->setValue(int(choices.max_new_tokens));
  max_new_tokens_->setAccessibleName(tr("Longest answer in tokens"));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* form = new QFormLayout(this);
  if (scope == Scope::new_chats) {
    thinking_ = new QCheckBox(tr("Think before answering"), this);
    thinking_->setObjectName(QStringLiteral("thinking"));
    thinking_->setChecked(choices.thinking);
    effort_ = new QSpinBox(this);
    effort_->setObjectName(QStringLiteral("effort"));
    effort_->setRange(1, 100);
    effort_->setValue(choices.effort);
    effort_->setAccessibleName(tr("Reasoning effort of new chats, 1 to 100"));
    effort_->setEnabled(choices.thinking);
    connect(thinking_, &QCheckBox::toggled, effort_, &QWidget::setEnabled);
    form->addRow(tr("Thinking"), thinking_);
    form->addRow(tr("Reasoning effort"), effort_);
  }
  form->addRow(tr("System prompt"), system_prompt_);
  form->addRow(tr("Temperature"), temperature_);
  form->addRow(tr("Top-p"), top_p_);
  form->addRow(tr("Longest answer (tokens)"), max_new_tokens_);
  form->addRow(buttons);
}

SessionChoices SessionSettingsDialog::choices() const {
  SessionChoices c = base_;
  c.system_prompt = system_prompt_->toPlainText();
  c.temperature = temperature_->value();
  c.top_p = top_p_->value();
  c.max_new_tokens = max_new_tokens_->value();
  if (effort_) c.effort = effort_->value();
  if (thinking_) c.thinking = thinking_->isChecked();
  return c;
}

}  // namespace flashdesk::ui
