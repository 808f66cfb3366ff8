// Per-session settings: system prompt, sampling (temperature, top-p) and the answer length limit;
// for the defaults of new chats also the reasoning effort and the thinking switch (a chat's own
// are on the window's effort control).
#pragma once

#include <QDialog>

#include "ui/chat_types.h"

class QCheckBox;
class QDoubleSpinBox;
class QPlainTextEdit;
class QSpinBox;

namespace flashdesk::ui {

class SessionSettingsDialog : public QDialog {
  Q_OBJECT

 public:
  enum class Scope { chat, new_chats };
  SessionSettingsDialog(const SessionChoices& choices, QWidget* parent = nullptr,
                        Scope scope = Scope::chat);

  // The shown choices with the edited fields (for one chat, effort and thinking pass through).
  SessionChoices choices() const;
  QSpinBox* effort() const { return effort_; }       // null for one chat
  QCheckBox* thinking() const { return thinking_; }  // null for one chat
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
  QSpinBox* effort_ = nullptr;
  QCheckBox* thinking_ = nullptr;
};

}  // namespace flashdesk::ui
