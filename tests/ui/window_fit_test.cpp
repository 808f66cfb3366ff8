// The app as a person meets it on a 1280x800 screen: the cache panel fits in the window it opens
// in and gives the width back; new messages and a regenerated chat scroll into view; the "New
// chats" summary of the settings shows all of itself; long and equal chat titles stay readable in
// the sidebar; a new chat starts from the new-chat defaults (effort and thinking included); the
// first window says what the demo model can do; Help ▸ About says what this is.
#include <QAction>
#include <QCheckBox>
#include <QLabel>
#include <QListView>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include "tests/ui/app_fixture.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/app_settings_dialog.h"
#include "ui/cache_panel.h"
#include "ui/effort_control.h"
#include "ui/session_list_model.h"
#include "ui/session_settings_dialog.h"
#include "ui/session_sidebar.h"

namespace flashdesk::ui::test {

namespace {

constexpr int kScreenWidth = 1280;

// A window over its own data folder, with no model (nothing here needs one).
struct BareApp {
  QTemporaryDir dir;
  std::unique_ptr<ChatController> controller;
  std::unique_ptr<MainWindow> window;

  BareApp() {
    const auto layout = storage::StorageLayout::in(dir.filePath("data").toStdString());
    controller = std::make_unique<ChatController>(
        std::make_unique<PersistentChatService>(storage::PersistentChatOptions{.layout = layout}),
        layout);
    window = std::make_unique<MainWindow>(*controller, QString());
    window->show();
  }
  ~BareApp() {
    window.reset();
    controller.reset();
  }
};

// A cache panel full of large figures: its longest lines.
CacheStats busy_stats() {
  CacheStats s;
  s.has_caches = true;
  s.ssd_blocks = 123456;
  s.ssd_bytes = int64_t{987654321} * 1000;
  s.block_reads_hit = 1234567;
  s.block_reads_missed = 7654321;
  s.block_writes_failed = 42;
  s.pool_entries = 1234;
  s.pool_bytes = uint64_t{123456789} * 1000;
  s.pool_budget_bytes = uint64_t{987654321} * 1000;
  s.turns = 123456;
  s.prompt_tokens = 123456789012;
  s.restored_tokens = 12345678901;
  s.reused_tokens = 98765432109;
  return s;
}

const QPushButton* send_button(const MainWindow& w) {
  for (const QPushButton* b : w.composer()->findChildren<QPushButton*>())
    if (b->accessibleName() == QStringLiteral("Send")) return b;
  return nullptr;
}

// The right edge of `w` in the window's coordinates.
int right_edge(const QWidget* w, const QWidget* window) {
  return w->mapTo(window, QPoint(w->width(), 0)).x();
}

MessageRow message(bool from_user, int n) {
  MessageRow row;
  row.from_user = from_user;
  row.text = QStringLiteral("Message %1. ").arg(n).repeated(30);
  return row;
}

bool at_end(const QScrollBar* bar) {
  return bar->maximum() > 0 && bar->value() == bar->maximum();
}

}  // namespace

class WindowFitTest : public QObject {
  Q_OBJECT

 private slots:
  void cachePanelKeepsTheWindowOnTheScreenAndGivesTheWidthBack() {
    BareApp app;
    MainWindow& w = *app.window;
    w.resize(1100, 720);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    const int before = w.width();
    w.cachePanel()->showStats(busy_stats());
    w.cachePanel()->show();
    QTest::qWait(100);
    QVERIFY2(w.width() <= before, qPrintable(QString::number(w.width())));
    QVERIFY(w.minimumSizeHint().width() <= kScreenWidth);
    const QPushButton* send = send_button(w);
    QVERIFY(send != nullptr);
    QVERIFY2(right_edge(send, &w) <= w.width(),
             qPrintable(
                 QStringLiteral("Send ends at %1 of %2").arg(right_edge(send, &w)).arg(w.width())));
    w.cachePanel()->hide();
    QTest::qWait(100);
    QCOMPARE(w.width(), before);
    QVERIFY(right_edge(send, &w) <= w.width());
  }

  void newMessagesAndAReopenedChatScrollIntoView() {
    MessageView view;
    view.resize(400, 300);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    for (int i = 0; i < 20; ++i) view.addMessage(message(i % 2 == 0, i));
    QTRY_VERIFY(at_end(view.verticalScrollBar()));
    // The reader scrolled up; their own next message still comes into view.
    view.verticalScrollBar()->setValue(0);
    view.addMessage(message(true, 20));
    QTRY_VERIFY(at_end(view.verticalScrollBar()));
    // An answer streams in below the end: the view follows it.
    view.beginAnswer();
    for (int i = 0; i < 20; ++i)
      view.appendAnswerText(false, QStringLiteral("More words. ").repeated(8));
    view.finishAnswer(QString());
    QTRY_VERIFY(at_end(view.verticalScrollBar()));
    // Regenerate reopens the chat: cleared and filled again, it shows the end, not the top.
    view.clearMessages();
    for (int i = 0; i < 20; ++i) view.addMessage(message(i % 2 == 0, i));
    QTRY_VERIFY(at_end(view.verticalScrollBar()));
  }

  void newChatsSummaryShowsAllOfItself() {
    AppSettings settings;
    settings.new_chat.system_prompt =
        QStringLiteral("You are a careful assistant who answers in full sentences. ").repeated(3);
    settings.new_chat.effort = 30;
    settings.new_chat.thinking = false;
    AppSettingsDialog dialog(settings);
    dialog.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dialog));
    QTest::qWait(50);
    const QLabel* summary = dialog.newChatSummary();
    QVERIFY(summary->text().contains(QStringLiteral("thinking off")));
    const int needed = summary->heightForWidth(summary->width());
    QVERIFY2(summary->height() >= needed,
             qPrintable(QStringLiteral("%1 of %2 px high").arg(summary->height()).arg(needed)));
    QVERIFY(right_edge(summary, &dialog) <= dialog.width());
    QVERIFY(dialog.width() <= kScreenWidth);
  }

  void longAndEqualChatTitlesStayReadable() {
    SessionSidebar sidebar;
    sidebar.resize(240, 400);
    sidebar.show();
    QVERIFY(QTest::qWaitForWindowExposed(&sidebar));
    const qint64 day = 24 * 3600 * 1000;
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    sidebar.model()->setRows(
        {{1, QStringLiteral("A very long question about ").repeated(8), now, 2},
         {2, QStringLiteral("Hello"), now - day, 2},
         {3, QStringLiteral("Hello"), now - 40 * day, 2}});
    QTest::qWait(50);
    QVERIFY(!sidebar.list()->horizontalScrollBar()->isVisible());
    const SessionListModel* m = sidebar.model();
    const QString a = m->index(1).data().toString(), b = m->index(2).data().toString();
    QVERIFY2(a != b, qPrintable(a));
    QVERIFY(a.startsWith(QStringLiteral("Hello")));
    QCOMPARE(m->index(1).data(Qt::EditRole).toString(), QStringLiteral("Hello"));  // renaming
  }

  void aNewChatStartsFromTheNewChatDefaults() {
    BareApp app;
    MainWindow& w = *app.window;
    AppSettings settings = w.appSettings();
    settings.new_chat.effort = 30;
    settings.new_chat.thinking = false;
    w.applyAppSettings(settings);
    // The chat shown last was at effort 90 with thinking on.
    SessionChoices last;
    last.effort = 90;
    last.thinking = true;
    w.effortControl()->setChoices(last);
    w.newSession();
    QTRY_VERIFY(w.currentSession() != 0);
    QTRY_COMPARE(w.effortControl()->choices().effort, 30);
    QCOMPARE(w.effortControl()->choices().thinking, false);
    // The new-chat dialog of the settings edits effort and thinking too.
    SessionSettingsDialog dialog(settings.new_chat, nullptr,
                                 SessionSettingsDialog::Scope::new_chats);
    QVERIFY(dialog.effort() != nullptr && dialog.thinking() != nullptr);
    dialog.effort()->setValue(64);
    dialog.thinking()->setChecked(true);
    QCOMPARE(dialog.choices().effort, 64);
    QCOMPARE(dialog.choices().thinking, true);
  }

  void theFirstWindowSaysWhatTheDemoModelCanDo() {
    QTemporaryDir data;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    const QString welcome = app.window->messageView()->emptyText();
    QVERIFY2(welcome.contains(QStringLiteral("arithmetic")) &&
                 welcome.contains(QStringLiteral("picture")) &&
                 welcome.contains(QStringLiteral("remember")),
             qPrintable(welcome));
    QVERIFY(app.window->messageView()->emptyTextVisible());
    app.type_and_send(QStringLiteral("Hi! My name is Quinn."));
    QVERIFY(app.wait_turn());
    QVERIFY(!app.window->messageView()->emptyTextVisible());
  }

  void helpAboutSaysWhatThisIs() {
    BareApp app;
    QAction* about = nullptr;
    for (QAction* menu : app.window->menuBar()->actions())
      if (menu->text().remove(QLatin1Char('&')) == QStringLiteral("Help") && menu->menu())
        for (QAction* a : menu->menu()->actions())
          if (a->text().remove(QLatin1Char('&')) == QStringLiteral("About FlashDesk")) about = a;
    QVERIFY(about != nullptr);
    about->trigger();
    auto* box = app.window->findChild<QMessageBox*>(QStringLiteral("aboutBox"));
    QVERIFY(box != nullptr);
    QVERIFY(box->text().contains(QStringLiteral(FLASHDESK_VERSION)));
    QVERIFY(box->text().contains(QStringLiteral("flash-tiny")));
    box->close();
  }
};

std::unique_ptr<QObject> make_window_fit_test() {
  return std::make_unique<WindowFitTest>();
}

}  // namespace flashdesk::ui::test

#include "window_fit_test.moc"
