// The effort slider, its presets and the thinking switch.
#include "ui/effort_control.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>

#include "engine/tokenizer/reasoning_effort.h"

namespace flashdesk::ui {

EffortControl::EffortControl(QWidget* parent)
    : QWidget(parent),
      thinking_(new QCheckBox(tr("Thinking"), this)),
      slider_(new QSlider(Qt::Horizontal, this)),
      value_(new QLabel(this)),
      low_(new QPushButton(tr("Low"), this)),
      high_(new QPushButton(tr("High"), this)),
      max_(new QPushButton(tr("Max"), this)) {
  thinking_->setChecked(true);
  thinking_->setAccessibleName(tr("Thinking on or off"));
  slider_->setRange(1, 100);
  slider_->setValue(ReasoningEffort::kDefault);
  slider_->setAccessibleName(tr("Reasoning effort"));
  slider_->setMinimumWidth(140);
  value_->setObjectName(QStringLiteral("effortValue"));
  value_->setMinimumWidth(value_->fontMetrics().horizontalAdvance(QStringLiteral("Effort 100")));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(thinking_);
  layout->addWidget(new QLabel(tr("Effort"), this));
  layout->addWidget(slider_, 1);
  layout->addWidget(value_);
  const std::pair<QPushButton*, int> presets[] = {{low_, ReasoningEffort::kLow},
                                                  {high_, ReasoningEffort::kHigh},
                                                  {max_, ReasoningEffort::kMax}};
  for (const auto& [button, value] : presets) {
    button->setToolTip(tr("Reasoning effort %1").arg(value));
    button->setAccessibleName(tr("Effort preset %1").arg(value));
    layout->addWidget(button);
    connect(button, &QPushButton::clicked, slider_,
            [this, value = value] { slider_->setValue(value); });
  }
  connect(slider_, &QSlider::valueChanged, this, [this] {
    refresh();
    emit changed(choices());
  });
  connect(thinking_, &QCheckBox::toggled, this, [this] {
    refresh();
    emit changed(choices());
  });
  refresh();
}

SessionChoices EffortControl::choices() const {
  SessionChoices c;
  c.effort = slider_->value();
  c.thinking = thinking_->isChecked();
  return c;
}

QPushButton* EffortControl::presetButton(int effort) const {
  if (effort == ReasoningEffort::kLow) return low_;
  if (effort == ReasoningEffort::kHigh) return high_;
  return effort == ReasoningEffort::kMax ? max_ : nullptr;
}

void EffortControl::setChoices(SessionChoices choices) {
  const QSignalBlocker block_slider(slider_);
  const QSignalBlocker block_switch(thinking_);
  slider_->setValue(choices.effort);
  thinking_->setChecked(choices.thinking);
  refresh();
}

void EffortControl::refresh() {
  const bool on = thinking_->isChecked();
  value_->setText(on ? tr("%1").arg(slider_->value()) : tr("off"));
  for (QWidget* w : {static_cast<QWidget*>(slider_), static_cast<QWidget*>(low_),
                     static_cast<QWidget*>(high_), static_cast<QWidget*>(max_)})
    w->setEnabled(on);
}

}  // namespace flashdesk::ui
