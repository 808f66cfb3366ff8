// The DSpark switch of the app settings on the real demo model (assets/models/flash-tiny ships a
// trained draft head): offered for it, off by default, greedy answers unchanged with it on, the
// status line shows the accepted drafts per verify, and the choice survives a restart.
#include <QCheckBox>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

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
  // Runs `start` and waits for the turn it starts; the turn's stats.
  template <class Start>
  TurnStats turn(Start start) const {
    QSignalSpy finished(controller->worker(), &ChatWorker::answerFinished);
    start();
    if (!QTest::qWaitFor([&] { return finished.count() == 1; }, kTurnMs)) return {};
    return finished.at(0).at(1).value<TurnStats>();
  }
  QString last_answer() const {
    const MessageView* view = window->messageView();
    return view->messageCount() ? view->message(view->messageCount() - 1)->text() : QString();
  }
};

}  // namespace

class DsparkSwitchTest : public QObject {
  Q_OBJECT

 private slots:
  void switchIsOfferedAndKeepsGreedyAnswers() {
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
      QVERIFY(!dialog->speculative()->isChecked());  // off by default
      dialog->reject();

      const TurnStats off = app.turn([&] {
        QTest::keyClicks(app.window->composer()->edit(), "What is the capital of France?");
        QTest::keyClick(app.window->composer()->edit(), Qt::Key_Return);
      });
      QVERIFY(off.generated_tokens > 1);
      QVERIFY(!off.speculative);
      plain = app.last_answer();
      QVERIFY(!plain.isEmpty());
      QVERIFY2(app.window->statusText().contains("tokens/s"), qPrintable(app.window->statusText()));
      QVERIFY2(!app.window->statusText().contains("accepted"),
               qPrintable(app.window->statusText()));

      dialog = app.window->editAppSettings();
      dialog->speculative()->setChecked(true);
      dialog->accept();
      QVERIFY(app.window->appSettings().speculative);
      const TurnStats on = app.turn([&] { app.window->regenerate(); });
      QVERIFY(on.speculative);
      QVERIFY(on.verifies > 0);
      QCOMPARE(on.generated_tokens, off.generated_tokens);
      QCOMPARE(app.last_answer(), plain);  // greedy: the same answer token for token
      const QString status = app.window->statusText();
      QVERIFY2(status.contains("tokens/s"), qPrintable(status));
      QVERIFY2(status.contains(
                   QStringLiteral("accepted %1 per verify").arg(on.mean_accepted, 0, 'f', 2)),
               qPrintable(status));
      QVERIFY2(on.mean_accepted > 0.0, qPrintable(status));  // the trained head's drafts are kept
    }
    {  // a restart keeps the switch on
      SwitchApp app(dir);
      QVERIFY(app.window->appSettings().speculative);
      QVERIFY(app.wait_model());
      AppSettingsDialog* dialog = app.window->editAppSettings();
      QVERIFY(dialog->speculative()->isEnabled());
      QVERIFY(dialog->speculative()->isChecked());
      dialog->reject();
    }
  }

  // Without a loaded model the switch cannot be turned on, and its tooltip says why.
  void switchIsDisabledWithoutAModel() {
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
