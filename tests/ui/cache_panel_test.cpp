// The cache panel on the real demo model: after a turn whose prompt fills KV blocks, the panel
// (fed by the worker through queued signals) shows the blocks on the SSD, this run's prompt
// tokens, and the window pool with the budget the app settings gave the service.
#include <QAction>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <filesystem>

#include "storage/kv_block_file.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/cache_panel.h"
#include "ui/composer.h"
#include "ui/main_window.h"
#include "ui/persistent_chat_service.h"

namespace flashdesk::ui::test {

namespace {

const QString kModel = QStringLiteral(FD_SOURCE_DIR "/assets/models/flash-tiny");

}  // namespace

class CachePanelTest : public QObject {
  Q_OBJECT

 private slots:
  void panelShowsSpilledBlocksAndTheConfiguredPool() {
    QTemporaryDir dir;
    QSettings store(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    AppSettings configured;
    configured.data_dir = dir.filePath("data");
    configured.window_pool_budget_bytes = 48 * kMiB;
    save_app_settings(store, configured);
    // main()'s wiring: settings → layout and service options.
    const AppSettings settings = load_app_settings(store);
    const auto layout = storage_layout(settings);
    ChatController controller(
        std::make_unique<PersistentChatService>(persistent_chat_options(settings, layout)), layout);
    MainWindow window(controller, kModel, &store);
    window.show();
    QVERIFY(QTest::qWaitFor([&] { return window.modelName().startsWith("Model:"); }, 60'000));
    CachePanel* panel = window.cachePanel();
    QSignalSpy stats(controller.worker(), &ChatWorker::cacheStatsReady);
    panel->toggleViewAction()->trigger();  // View ▸ Cache panel: asks the worker at once
    QVERIFY(stats.wait(10'000));
    QTRY_VERIFY(panel->stats().has_caches);
    QCOMPARE(panel->stats().ssd_blocks, 0);
    QCOMPARE(panel->stats().pool_budget_bytes, 48 * kMiB);  // the settings reached the pool

    // A prompt of more than one 256-token block: its full blocks are spilled after the turn.
    QString question = QStringLiteral("Please read my notes first.");
    for (int i = 1; i <= 40; ++i)
      question += QStringLiteral(" Note %1: the ship number %1 sailed north at dawn.").arg(i);
    QTest::keyClicks(window.composer()->edit(), question);
    QTest::keyClick(window.composer()->edit(), Qt::Key_Return);
    QVERIFY(QTest::qWaitFor([&] { return !window.generating(); }, 120'000));
    QVERIFY2(window.composer()->errorText().isEmpty(), qPrintable(window.composer()->errorText()));
    // Blocks are written in the background; the visible panel asks again every 2 s.
    QTRY_VERIFY_WITH_TIMEOUT(panel->stats().ssd_blocks > 0, 15'000);
    const CacheStats shown = panel->stats();
    qInfo("cache panel after one turn:\n%s", qPrintable(panel->text()));
    QCOMPARE(shown.ssd_blocks, kv_block_files(settings.data_dir));
    QVERIFY(shown.ssd_bytes > 0);
    QCOMPARE(shown.turns, 1);
    QVERIFY(shown.prompt_tokens > 256);
    QCOMPARE(shown.restored_tokens, 0);  // a new session: nothing to restore yet
    QVERIFY(panel->text().contains(QStringLiteral("Blocks: %1").arg(shown.ssd_blocks)));

    // A new chat parks the first one's window in the pool; the same question there starts from
    // the blocks the first chat wrote (they are keyed by the tokens, not the session).
    const qint64 first = window.currentSession();
    window.newSession();
    QVERIFY(QTest::qWaitFor(
        [&] {
          const qint64 id = window.currentSession();
          return id != 0 && id != first;
        },
        10'000));
    QTest::keyClicks(window.composer()->edit(), question);
    QTest::keyClick(window.composer()->edit(), Qt::Key_Return);
    QVERIFY(QTest::qWaitFor([&] { return !window.generating(); }, 120'000));
    QTRY_COMPARE_WITH_TIMEOUT(panel->stats().turns, 2, 10'000);
    const CacheStats after = panel->stats();
    qInfo("cache panel after the same question in a new chat:\n%s", qPrintable(panel->text()));
    QVERIFY(after.pool_entries > 0);
    QVERIFY(after.pool_bytes > 0 && after.pool_bytes <= 48 * kMiB);
    QVERIFY(after.restored_tokens >= 256);
    QVERIFY(after.block_reads_hit > 0);
    QVERIFY(panel->text().contains(QStringLiteral("from SSD")));
  }
};

std::unique_ptr<QObject> make_cache_panel_test() {
  return std::make_unique<CachePanelTest>();
}

}  // namespace flashdesk::ui::test

#include "cache_panel_test.moc"
