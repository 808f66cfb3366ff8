// Per-session settings: system prompt, sampling (temperature, top-p) and the answer length limit.
#pragma once

#include <QDialog>

#include "ui/chat_types.h"

class QDoubleSpinBox;
class QPlainTextEdit;
class QSpinBox;

namespace flashdesk::ui {

class SessionSettingsDialog : public QDialog {
  Q_OBJECT

 public:
  SessionSettingsDialog(const SessionChoices& choices, QWidget* parent = nullptr);

  // The shown choices with the edited fields (effort and thinking pass through).
  SessionChoices choices() const;
  QPlainTextEdit* systemPrompt() const { return system_prompt_; }
  QDoubleSpinBox* temperature() const { return temperature_; }
  QDoubleSpinBox* topP() const { return top_p_; }
  QSpinBox* maxNewTokens() const { return max_new_tokens_; }

 private:
  SessionChoices base_;
  QPlainTextEdit* system_prompt_;
  QDoubleSpinBox* temperature_;
  QDoubleSpinBox* top_p_;
  QSpinBox* max_new_tokens_;
};

}  // namespace flashdesk::ui
