// Loading the demo model (assets/models/flash-tiny, CPU) as the app does: the progress bar goes
// from busy to a real percentage that ends at its maximum, the device chosen in the settings is
// saved and used by the next load (File ▸ Reload the model), and a storage failure during a turn
// is shown in the status bar.
#include <QComboBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <filesystem>
#include <fstream>

#include "engine/runtime/backend_factory.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/app_settings_dialog.h"
#include "ui/cache_panel.h"
#include "ui/chat_worker.h"
#include "ui/composer.h"
#include "ui/main_window.h"
#include "ui/persistent_chat_service.h"

namespace flashdesk::ui::test {

namespace {

const QString kModel = QStringLiteral(FD_SOURCE_DIR "/assets/models/flash-tiny");
constexpr int kLoadMs = 60'000;
constexpr int kTurnMs = 120'000;

// The app as main() wires it: settings file, data folder, the service built with the settings'
// device, the window loading the demo model.
struct DeviceApp {
  QTemporaryDir dir;
  std::unique_ptr<QSettings> store;
  std::unique_ptr<ChatController> controller;
  std::unique_ptr<MainWindow> window;

  DeviceApp() {
    store = std::make_unique<QSettings>(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    const AppSettings settings = load_app_settings(*store);
    const auto layout = storage::StorageLayout::in(dir.filePath("data").toStdString());
    EngineOptions engine;
    engine.backend = settings.backend.toStdString();
    engine.threads = settings.threads;
    controller = std::make_unique<ChatController>(
        std::make_unique<PersistentChatService>(persistent_chat_options(settings, layout), engine),
        layout);
    window = std::make_unique<MainWindow>(*controller, QString(), store.get());
    window->show();
  }
  ~DeviceApp() {
    window.reset();
    controller.reset();
  }
  // `backend`: how the model bar names it, or the start of that name.
  bool wait_model(const QString& backend) const {
    return QTest::qWaitFor(
        [&] {
          return window->modelName().startsWith("Model:") &&
                 window->modelName().contains("(" + backend);
        },
        kLoadMs);
  }
  bool send_and_wait(const QString& text) const {
    QTest::keyClicks(window->composer()->edit(), text);
    QTest::keyClick(window->composer()->edit(), Qt::Key_Return);
    return QTest::qWaitFor([&] { return !window->generating(); }, kTurnMs);
  }
};

}  // namespace

class ModelLoadTest : public QObject {
  Q_OBJECT

 private slots:
  void progressBarShowsAPercentageThatEndsAtItsMaximum() {
    DeviceApp app;
    QProgressBar* bar = app.window->modelProgress();
    QSignalSpy reports(app.controller->worker(), &ChatWorker::modelProgress);
    QSignalSpy values(bar, &QProgressBar::valueChanged);
    app.window->loadModel(kModel);
    QVERIFY2(app.wait_model("cpu-optimized"),
             qPrintable(app.window->modelName() + " | " + app.window->modelError()));
    QVERIFY2(reports.count() >= 10, "the load reported too few steps for a bar");
    qint64 previous = 0, total = reports.first().at(1).toLongLong();
    QVERIFY(total > 20 << 20);  // the demo's weights, ~24 MB
    for (const auto& args : reports) {
      QVERIFY(args.at(0).toLongLong() >= previous);
      QCOMPARE(args.at(1).toLongLong(), total);
      previous = args.at(0).toLongLong();
    }
    QCOMPARE(previous, total);
    QCOMPARE(bar->maximum(), 1000);  // a real range, not the busy bar (0, 0)
    QCOMPARE(bar->value(), bar->maximum());
    QVERIFY(values.count() >= 10);
    QVERIFY(bar->format().contains("%p"));
    QVERIFY(bar->isHidden());  // gone once the model is ready
    qInfo("model load: %lld progress reports, %lld bar values, %lld bytes",
          qlonglong(reports.count()), qlonglong(values.count()), qlonglong(total));
  }

  void deviceChoiceIsSavedAndUsedAtTheNextLoad() {
    DeviceApp app;
    app.window->loadModel(kModel);
    QVERIFY2(app.wait_model("cpu-optimized"),
             qPrintable(app.window->modelName() + " | " +
                        app.window->modelError()));  // the default backend
    AppSettingsDialog* dialog = app.window->editAppSettings();
    QStringList listed;
    for (int i = 0; i < dialog->backend()->count(); ++i) listed << dialog->backend()->itemText(i);
    QStringList factory;
    for (const std::string& name : backend_names()) factory << QString::fromStdString(name);
    QCOMPARE(listed, factory);  // from the factory, not a list of our own
    QCOMPARE(dialog->backend()->currentText(), QStringLiteral("cpu"));
    QCOMPARE(dialog->threads()->value(), 0);
    QVERIFY(dialog->threads()->text().startsWith("All cores"));
    if (!factory.contains("cuda"))  // no GPU here: the dialog says why instead of offering one
      QVERIFY2(dialog->devices()->text().contains("no GPU: "),
               qPrintable(dialog->devices()->text()));
    else
      QVERIFY2(dialog->devices()->text().contains("cuda:0 "),
               qPrintable(dialog->devices()->text()));
    QVERIFY(!dialog->backend()->accessibleName().isEmpty());
    QVERIFY(!dialog->threads()->accessibleName().isEmpty());
    dialog->backend()->setCurrentText(QStringLiteral("cpu-reference"));
    dialog->threads()->setValue(1);
    dialog->accept();
    QVERIFY2(app.window->statusText().contains("next model load"),
             qPrintable(app.window->statusText()));
    QVERIFY(app.window->modelName().contains("(cpu-optimized"));  // kept until the next load

    app.window->reloadModel();
    QVERIFY2(app.wait_model("cpu-reference)"), qPrintable(app.window->modelName()));

    QSettings reread(app.dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    QStringList problems;
    const AppSettings saved = load_app_settings(reread, &problems);
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
    QCOMPARE(saved.backend, QStringLiteral("cpu-reference"));
    QCOMPARE(saved.threads, 1);
  }

  // The cache sizes of the settings reach the stores at the next model load, no restart needed:
  // the window pool's budget as the cache panel reads it from the pool itself.
  void cacheSizesApplyAtTheNextLoad() {
    DeviceApp app;
    app.window->loadModel(kModel);
    QVERIFY(app.wait_model("cpu"));
    CachePanel* panel = app.window->cachePanel();
    QSignalSpy stats(app.controller->worker(), &ChatWorker::cacheStatsReady);
    panel->toggleViewAction()->trigger();  // shown: it asks the worker now and every 2 s
    QVERIFY(stats.wait(10'000));
    QTRY_VERIFY(panel->stats().has_caches);
    const uint64_t before = panel->stats().pool_budget_bytes;
    QVERIFY(before > 0 && before != 40 * kMiB);

    AppSettingsDialog* dialog = app.window->editAppSettings();
    dialog->windowPoolBudgetMiB()->setValue(40);
    dialog->accept();
    QVERIFY2(app.window->statusText().contains("cache sizes apply at the next model load"),
             qPrintable(app.window->statusText()));
    stats.clear();
    QVERIFY(stats.wait(10'000));
    QCOMPARE(panel->stats().pool_budget_bytes, before);  // the loaded stores keep theirs

    app.window->reloadModel();  // File ▸ Reload the model (F5)
    QTRY_COMPARE_WITH_TIMEOUT(panel->stats().pool_budget_bytes, 40 * kMiB, 15'000);
  }

  void unknownStoredBackendFallsBackWithAMessage() {
    QTemporaryDir dir;
    QSettings store(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    store.setValue("engine/backend", "cuda-from-another-build");
    store.setValue("engine/threads", "-3");
    QStringList problems;
    const AppSettings s = load_app_settings(store, &problems);
    QCOMPARE(s.backend, QStringLiteral("cpu"));
    QCOMPARE(s.threads, 0);
    QCOMPARE(problems.size(), 2);
    QVERIFY2(problems[0].contains("engine/backend") &&
                 problems[0].contains("cuda-from-another-build") &&
                 problems[0].contains("cpu-reference"),
             qPrintable(problems[0]));
    QVERIFY2(problems[1].contains("engine/threads"), qPrintable(problems[1]));
  }

  // The KV folder is replaced by a plain file after the load, so the blocks spilled after the
  // first turn cannot be written (a real I/O failure, as a full disk would be; root ignores
  // permissions, so a read-only folder would not do). The chat goes on and the next turn tells.
  void storageFailureDuringATurnIsShown() {
    DeviceApp app;
    app.window->loadModel(kModel);
    QVERIFY2(app.wait_model("cpu-optimized"),
             qPrintable(app.window->modelName() + " | " + app.window->modelError()));
    const auto kv = storage::StorageLayout::in(app.dir.filePath("data").toStdString()).kv_dir();
    std::filesystem::remove_all(kv);
    { std::ofstream(kv) << "not a folder"; }
    QSignalSpy warnings(app.controller->worker(), &ChatWorker::storageWarning);
    QString question = QStringLiteral("Please read my notes.");
    for (int i = 1; i <= 40; ++i)
      question += QStringLiteral(" Note %1: the ship number %1 sailed north at dawn.").arg(i);
    QVERIFY(app.send_and_wait(question));  // > 2 blocks of 256 tokens: spilled after the turn
    QVERIFY(app.window->composer()->errorText().isEmpty());
    // Block writes are asynchronous: their failure is reported with the next turn.
    QVERIFY(app.send_and_wait(QStringLiteral("And then?")));
    QVERIFY(QTest::qWaitFor([&] { return !warnings.isEmpty(); }, 5000));
    QVERIFY2(app.window->composer()->errorText().isEmpty(),
             qPrintable(app.window->composer()->errorText()));
    const QString shown = app.window->storageWarning();
    QVERIFY2(shown.contains("writing the KV cache"), qPrintable(shown));
    QVERIFY(shown.startsWith("Storage problem"));
    qInfo("storage warning shown: %s", qPrintable(shown));
  }
};

std::unique_ptr<QObject> make_model_load_test() {
  return std::make_unique<ModelLoadTest>();
}

}  // namespace flashdesk::ui::test

#include "model_load_test.moc"
