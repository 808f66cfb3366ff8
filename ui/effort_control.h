// Reasoning effort: a 1-100 slider with Low (50) / High (75) / Max (100) presets and a thinking
// on/off switch. The effort is meaningful only with thinking on, so the slider follows the switch.
#pragma once

#include <QWidget>

#include "ui/chat_types.h"

class QCheckBox;
class QLabel;
class QPushButton;
class QSlider;

namespace flashdesk::ui {

class EffortControl : public QWidget {
  Q_OBJECT

 public:
  explicit EffortControl(QWidget* parent = nullptr);

  SessionChoices choices() const;
  QSlider* slider() const { return slider_; }
  QCheckBox* thinkingSwitch() const { return thinking_; }
  QPushButton* presetButton(int effort) const;  // 50, 75 or 100

 public slots:
  // Shows a session's stored choices without emitting changed().
  void setChoices(flashdesk::ui::SessionChoices choices);

 signals:
  void changed(flashdesk::ui::SessionChoices choices);

 private:
  void refresh();

  QCheckBox* thinking_;
  QSlider* slider_;
  QLabel* value_;
  QPushButton* low_;
  QPushButton* high_;
  QPushButton* max_;
};

}  // namespace flashdesk::ui
