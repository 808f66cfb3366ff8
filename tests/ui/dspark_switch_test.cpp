// The DSpark choice of the app settings (Automatic, On, Off) on the real demo model
// (assets/models/flash-tiny ships a trained draft head): offered for it, Automatic by default and
// so off on the CPU backend the tests run on, greedy answers unchanged with it on, the status line
// shows the accepted drafts per verify, the choice survives a restart, and the 0/1 that earlier
// versions stored still read as Off/On.
#include <QComboBox>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QVariant>
#include <utility>
#include <vector>

#include "tests/ui/app_fixture.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/app_settings_dialog.h"

namespace flashdesk::ui::test {

namespace {

// A window over its own data folder and settings file, loading the demo model (as main() does).
struct SwitchApp {
  std::unique_ptr<QSettings> store;
  std::unique_ptr<ChatController> controller;
  std::unique_ptr<MainWindow> window;

  explicit SwitchApp(const QTemporaryDir& dir) {
    store = std::make_unique<QSettings>(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    const AppSettings settings = load_app_settings(*store);
    const auto layout = storage::StorageLayout::in(dir.filePath("data").toStdString());
    controller = std::make_unique<ChatController>(
        std::make_unique<PersistentChatService>(persistent_chat_options(settings, layout)), layout);
    window = std::make_unique<MainWindow>(*controller, kModel, store.get());
    window->show();
  }
  ~SwitchApp() {
    window.reset();
    controller.reset();
  }
  bool wait_model() const {
    return QTest::qWaitFor([&] { return window->modelName().startsWith("Model:"); }, kLoadMs);
  }
  // Runs `start` and waits until the window has shown the turn it starts; the turn's stats, none
  // when the window did not start one. The spy sees answerFinished in the worker's thread; the
  // window shows the answer (and stops generating) only when the GUI thread delivers it.
  template <class Start>
  TurnStats turn(Start start) const {
    QSignalSpy finished(controller->worker(), &ChatWorker::answerFinished);
    start();
    if (!window->generating()) return {};
    const auto shown = [&] { return finished.count() == 1 && !window->generating(); };
    if (!QTest::qWaitFor(shown, kTurnMs)) return {};
    return finished.at(0).at(1).value<TurnStats>();
  }
  // Regenerate once the window offers it: the last turn shown there, and after a restart the
  // chat opened, which the worker does after the model load that wait_model() sees.
  TurnStats regenerate() const {
    const auto* button = window->findChild<QPushButton*>(QStringLiteral("regenerate"));
    if (!QTest::qWaitFor([&] { return button->isEnabled(); }, kLoadMs)) return {};
    return turn([&] { window->regenerate(); });
  }
  QString last_answer() const {
    const MessageView* view = window->messageView();
    return view->messageCount() ? view->message(view->messageCount() - 1)->text() : QString();
  }
};

SpeculativeChoice shown_choice(const AppSettingsDialog* dialog) {
  return SpeculativeChoice(dialog->speculative()->currentData().toInt());
}

void choose(AppSettingsDialog* dialog, SpeculativeChoice choice) {
  dialog->speculative()->setCurrentIndex(dialog->speculative()->findData(int(choice)));
}

}  // namespace

class DsparkSwitchTest : public QObject {
  Q_OBJECT

 private slots:
  void automaticIsOffOnTheCpuAndOnKeepsGreedyAnswers() {
    QTemporaryDir dir;
    {  // greedy, short chat answers for a quick turn
      QSettings store(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
      store.setValue("new_chat/thinking", 0);
      store.setValue("new_chat/temperature", 0.0);
      store.setValue("new_chat/max_new_tokens", 48);
    }
    QString plain;
    {
      SwitchApp app(dir);
      QVERIFY(app.wait_model());
      AppSettingsDialog* dialog = app.window->editAppSettings();
      QVERIFY2(dialog->speculative()->isEnabled(), qPrintable(dialog->speculative()->toolTip()));
      QCOMPARE(shown_choice(dialog), SpeculativeChoice::kAuto);  // the default
      QCOMPARE(dialog->speculative()->count(), 3);
      // The tests load the model on the CPU: Automatic is off there, and the tooltip says so.
      QVERIFY2(dialog->speculative()->toolTip().contains("Automatic is off for this model"),
               qPrintable(dialog->speculative()->toolTip()));
      dialog->reject();

      const TurnStats off = app.turn([&] {
        QTest::keyClicks(app.window->composer()->edit(), "What is the capital of France?");
        QTest::keyClick(app.window->composer()->edit(), Qt::Key_Return);
      });
      QVERIFY(off.generated_tokens > 1);
      QVERIFY(!off.speculative);  // Automatic on the CPU
      plain = app.last_answer();
      QVERIFY(!plain.isEmpty());
      // The spy sees the worker's signal in the worker's thread; the window updates its status
      // line when the GUI thread delivers it, a moment later under load.
      QTRY_VERIFY2(app.window->statusText().contains("tokens/s"),
                   qPrintable(app.window->statusText()));
      QVERIFY2(!app.window->statusText().contains("accepted"),
               qPrintable(app.window->statusText()));

      dialog = app.window->editAppSettings();
      choose(dialog, SpeculativeChoice::kOn);
      dialog->accept();
      QCOMPARE(app.window->appSettings().speculative, SpeculativeChoice::kOn);
      const TurnStats on = app.regenerate();
      QVERIFY(on.speculative);
      QVERIFY(on.verifies > 0);
      QCOMPARE(on.generated_tokens, off.generated_tokens);
      QCOMPARE(app.last_answer(), plain);  // greedy: the same answer token for token
      QTRY_VERIFY2(app.window->statusText().contains("accepted"),
                   qPrintable(app.window->statusText()));
      const QString status = app.window->statusText();
      QVERIFY2(status.contains("tokens/s"), qPrintable(status));
      QVERIFY2(status.contains(
                   QStringLiteral("accepted %1 per verify").arg(on.mean_accepted, 0, 'f', 2)),
               qPrintable(status));
      QVERIFY2(on.mean_accepted > 0.0, qPrintable(status));  // the trained head's drafts are kept
    }
    {  // a restart keeps On
      SwitchApp app(dir);
      QCOMPARE(app.window->appSettings().speculative, SpeculativeChoice::kOn);
      QVERIFY(app.wait_model());
      AppSettingsDialog* dialog = app.window->editAppSettings();
      QVERIFY(dialog->speculative()->isEnabled());
      QCOMPARE(shown_choice(dialog), SpeculativeChoice::kOn);
      choose(dialog, SpeculativeChoice::kOff);
      dialog->accept();
      QCOMPARE(app.window->appSettings().speculative, SpeculativeChoice::kOff);
      const TurnStats off = app.regenerate();
      QVERIFY(off.generated_tokens > 1);
      QVERIFY(!off.speculative);
      QCOMPARE(app.last_answer(), plain);
    }
    QSettings store(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    QCOMPARE(store.value("engine/speculative").toString(), QStringLiteral("off"));
  }

  // The stored words, and the 0 / 1 of the earlier on/off switch read as Off / On; anything else
  // is Automatic with a problem line.
  void storedChoicesAreReadAndOldSwitchValuesKeepTheirMeaning() {
    QTemporaryDir dir;
    QSettings store(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    QCOMPARE(load_app_settings(store).speculative, SpeculativeChoice::kAuto);  // nothing stored
    const std::vector<std::pair<QVariant, SpeculativeChoice>> cases = {
        {QStringLiteral("auto"), SpeculativeChoice::kAuto},
        {QStringLiteral("on"), SpeculativeChoice::kOn},
        {QStringLiteral("off"), SpeculativeChoice::kOff},
        {1, SpeculativeChoice::kOn},
        {0, SpeculativeChoice::kOff}};
    for (const auto& [stored, expected] : cases) {
      store.setValue("engine/speculative", stored);
      store.sync();
      QSettings reread(dir.filePath("flashdesk.conf"), QSettings::IniFormat);  // as at a start
      QStringList problems;
      QCOMPARE(load_app_settings(reread, &problems).speculative, expected);
      QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
    }
    store.setValue("engine/speculative", QStringLiteral("sometimes"));
    QStringList problems;
    QCOMPARE(load_app_settings(store, &problems).speculative, SpeculativeChoice::kAuto);
    QCOMPARE(problems.size(), 1);
    QVERIFY2(problems[0].startsWith("engine/speculative: \"sometimes\""), qPrintable(problems[0]));
    for (const SpeculativeChoice choice :
         {SpeculativeChoice::kAuto, SpeculativeChoice::kOn, SpeculativeChoice::kOff}) {
      AppSettings s;
      s.speculative = choice;
      QCOMPARE(AppSettingsDialog(s).settings(), s);  // shown and returned unchanged
      save_app_settings(store, s);
      QCOMPARE(load_app_settings(store).speculative, choice);
    }
  }

  // Without a loaded model the choice cannot be changed, and its tooltip says why.
  void choiceIsDisabledWithoutAModel() {
    QTemporaryDir dir;
    QSettings store(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    const auto layout = storage::StorageLayout::in(dir.filePath("data").toStdString());
    ChatController controller(
        std::make_unique<PersistentChatService>(persistent_chat_options(AppSettings{}, layout)),
        layout);
    MainWindow window(controller, QString(), &store);
    AppSettingsDialog* dialog = window.editAppSettings();
    QVERIFY(!dialog->speculative()->isEnabled());
    QVERIFY2(dialog->speculative()->toolTip().contains("draft head"),
             qPrintable(dialog->speculative()->toolTip()));
    dialog->reject();
  }
};

std::unique_ptr<QObject> make_dspark_switch_test() {
  return std::make_unique<DsparkSwitchTest>();
}

}  // namespace flashdesk::ui::test

#include "dspark_switch_test.moc"
