// EffortControl: presets, the slider's range, the thinking switch, silent restore of stored
// choices.
#include <QCheckBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QTest>

#include "tests/ui/ui_test_classes.h"
#include "ui/effort_control.h"

namespace flashdesk::ui::test {

class EffortControlTest : public QObject {
  Q_OBJECT

 private slots:
  void presetsSetLowHighMax() {
    EffortControl control;
    QSignalSpy changed(&control, &EffortControl::changed);
    const std::pair<int, int> presets[] = {{50, 50}, {100, 100}, {75, 75}};
    for (const auto& [button, value] : presets) {
      QTest::mouseClick(control.presetButton(button), Qt::LeftButton);
      QCOMPARE(control.choices().effort, value);
      QCOMPARE(changed.back().at(0).value<SessionChoices>().effort, value);
    }
    QCOMPARE(changed.count(), 3);
  }

  void sliderSpansOneToHundred() {
    EffortControl control;
    control.slider()->setValue(0);
    QCOMPARE(control.choices().effort, 1);
    control.slider()->setValue(250);
    QCOMPARE(control.choices().effort, 100);
    control.slider()->setFocus();
    QTest::keyClick(control.slider(), Qt::Key_Home);
    QCOMPARE(control.choices().effort, 1);
  }

  void thinkingOffDisablesTheEffort() {
    EffortControl control;
    QSignalSpy changed(&control, &EffortControl::changed);
    QTest::mouseClick(control.thinkingSwitch(), Qt::LeftButton);
    QCOMPARE(changed.count(), 1);
    QVERIFY(!control.choices().thinking);
    QVERIFY(!control.slider()->isEnabled());
    QVERIFY(!control.presetButton(100)->isEnabled());
  }

  void storedChoicesAreShownWithoutEmitting() {
    EffortControl control;
    QSignalSpy changed(&control, &EffortControl::changed);
    SessionChoices stored;
    stored.effort = 33;
    stored.thinking = false;
    control.setChoices(stored);
    QCOMPARE(control.choices().effort, 33);
    QVERIFY(!control.choices().thinking);
    QCOMPARE(changed.count(), 0);
  }
};

std::unique_ptr<QObject> make_effort_control_test() {
  return std::make_unique<EffortControlTest>();
}

}  // namespace flashdesk::ui::test

#include "effort_control_test.moc"
