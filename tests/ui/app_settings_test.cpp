// The application settings (dialog, QSettings, the options the service is built with), the
// light / dark themes and the menu shortcuts, on a window with no model loaded (no turns here:
// CachePanelTest runs those).
#include <QAbstractSpinBox>
#include <QAction>
#include <QApplication>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include "tests/ui/ui_test_classes.h"
#include "ui/app_settings_dialog.h"
#include "ui/cache_panel.h"
#include "ui/main_window.h"
#include "ui/message_bubble.h"
#include "ui/message_view.h"
#include "ui/persistent_chat_service.h"
#include "ui/session_settings_dialog.h"
#include "ui/session_sidebar.h"

namespace flashdesk::ui::test {

namespace {

// A window over a data folder and a settings file of its own, as main() wires them.
struct SettingsApp {
  QTemporaryDir dir;
  std::unique_ptr<QSettings> store;
  std::unique_ptr<ChatController> controller;
  std::unique_ptr<MainWindow> window;

  SettingsApp() { open(); }
  ~SettingsApp() { close(); }
  void open() {
    store = std::make_unique<QSettings>(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    const AppSettings settings = load_app_settings(*store);
    const auto layout = storage::StorageLayout::in(dir.filePath("data").toStdString());
    controller = std::make_unique<ChatController>(
        std::make_unique<PersistentChatService>(persistent_chat_options(settings, layout)), layout);
    window = std::make_unique<MainWindow>(*controller, QString(), store.get());
    window->show();
  }
  void close() {
    window.reset();
    controller.reset();
    store.reset();
  }
};

QAction* action_with(QMenuBar* bar, const QKeySequence& keys) {
  for (QAction* menu : bar->actions())
    for (QAction* action : menu->menu()->actions())
      if (action->shortcut() == keys) return action;
  return nullptr;
}

double mean_lightness(const QImage& image) {
  double sum = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) sum += QColor(image.pixel(x, y)).lightness();
  return sum / double(image.width() * image.height());
}

// The text of `label` against the bubble behind it (WCAG ratio; 4.5 is the readable minimum).
double label_contrast(const MessageBubble* bubble, const char* label_name) {
  const auto* label = bubble->findChild<QLabel*>(QLatin1String(label_name));
  return contrast_ratio(label->palette().color(label->foregroundRole()),
                        bubble->palette().color(bubble->backgroundRole()));
}

}  // namespace

class AppSettingsTest : public QObject {
  Q_OBJECT

 private slots:
  void cleanup() { apply_theme(ThemeChoice::system); }

  void dialogValuesAreSavedAndReachTheServiceOptions() {
    SettingsApp app;
    QCOMPARE(app.window->appSettings(), AppSettings{});  // nothing stored yet: the defaults
    AppSettingsDialog* dialog = app.window->editAppSettings();
    QCOMPARE(dialog->kvDiskBudgetGiB()->value(), 16.0);
    dialog->dataDir()->setText(app.dir.filePath("elsewhere"));
    dialog->kvDiskBudgetGiB()->setValue(2.5);
    dialog->kvRetentionHours()->setValue(48);
    dialog->windowPoolBudgetMiB()->setValue(96);
    dialog->windowPoolTtlMinutes()->setValue(25);
    // The new-chat defaults are edited in the per-session dialog, opened from this one.
    QTest::mouseClick(dialog->newChatDefaultsButton(), Qt::LeftButton);
    auto* defaults = dialog->findChild<SessionSettingsDialog*>();
    QVERIFY(defaults);
    defaults->systemPrompt()->setPlainText(QStringLiteral("Answer like a pirate."));
    defaults->temperature()->setValue(0.7);
    defaults->topP()->setValue(0.9);
    defaults->accept();
    QVERIFY(dialog->newChatSummary()->text().contains("temperature 0.70"));
    dialog->accept();
    QVERIFY(app.window->statusText().contains("after a restart"));

    app.close();  // a new process reads what the dialog saved
    QSettings reread(app.dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    QStringList problems;
    const AppSettings s = load_app_settings(reread, &problems);
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
    QCOMPARE(s.data_dir, app.dir.filePath("elsewhere"));
    QCOMPARE(s.kv_disk_budget_bytes, uint64_t(2.5 * double(kGiB)));
    QCOMPARE(s.kv_retention_hours, 48);
    QCOMPARE(s.window_pool_budget_bytes, 96 * kMiB);
    QCOMPARE(s.window_pool_ttl_minutes, 25);
    QCOMPARE(s.new_chat.system_prompt, QStringLiteral("Answer like a pirate."));
    QCOMPARE(s.new_chat.temperature, 0.7);
    QCOMPARE(s.new_chat.top_p, 0.9);

    const storage::PersistentChatOptions options = persistent_chat_options(s, storage_layout(s));
    QCOMPARE(options.layout.data_dir,
             std::filesystem::path(app.dir.filePath("elsewhere").toStdString()));
    QCOMPARE(options.blocks.disk_budget_bytes, uint64_t(2.5 * double(kGiB)));
    QVERIFY(options.blocks.retention == std::chrono::hours(48));
    QCOMPARE(options.window_pool.budget_bytes, 96 * kMiB);
    QVERIFY(options.window_pool.ttl == std::chrono::minutes(25));

    // Unchanged fields stay exact through the dialog (the GiB box shows two decimals).
    AppSettings odd;
    odd.kv_disk_budget_bytes = 5'000'000'123;
    QCOMPARE(AppSettingsDialog(odd).settings(), odd);
  }

  void badStoredValuesFallBackToDefaultsWithAMessage() {
    QTemporaryDir dir;
    QSettings store(dir.filePath("flashdesk.conf"), QSettings::IniFormat);
    store.setValue("kv/retention_hours", "forever");
    store.setValue("window_pool/ttl_minutes", -5);
    store.setValue("new_chat/top_p", 0);
    store.setValue("view/theme", "purple");
    store.setValue("kv/disk_budget_bytes", qulonglong(8) << 30);
    QStringList problems;
    const AppSettings s = load_app_settings(store, &problems);
    QCOMPARE(problems.size(), 4);
    QVERIFY2(problems[0].startsWith("kv/retention_hours: \"forever\" is not a number"),
             qPrintable(problems[0]));
    QVERIFY(problems.join('\n').contains("view/theme: \"purple\""));
    AppSettings expected;
    expected.kv_disk_budget_bytes = uint64_t(8) << 30;  // the one valid value is kept
    QCOMPARE(s, expected);
  }

  void newChatsStartWithTheDefaults() {
    SettingsApp app;
    AppSettings settings = app.window->appSettings();
    settings.new_chat.system_prompt = QStringLiteral("Be brief.");
    settings.new_chat.temperature = 0.5;  // exact as the stored float
    settings.new_chat.max_new_tokens = 300;
    app.window->applyAppSettings(settings);
    QSignalSpy opened(app.controller->worker(), &ChatWorker::sessionOpened);
    QApplication::setActiveWindow(app.window.get());
    QVERIFY(QTest::qWaitForWindowActive(app.window.get()));
    QTest::keyClick(app.window.get(), Qt::Key_N, Qt::ControlModifier);
    QVERIFY(opened.wait(10'000));
    const SessionChoices stored = opened.at(0).at(1).value<SessionChoices>();
    QCOMPARE(stored.system_prompt, QStringLiteral("Be brief."));
    QCOMPARE(stored.temperature, 0.5);
    QCOMPARE(stored.max_new_tokens, 300);
    QCOMPARE(app.window->currentChoices().system_prompt, QStringLiteral("Be brief."));
  }

  void menusHaveTheShortcutsAndControlsHaveNames() {
    SettingsApp app;
    QMenuBar* bar = app.window->menuBar();
    QVERIFY(action_with(bar, QKeySequence::New));
    QVERIFY(action_with(bar, QKeySequence::Find));
    QVERIFY(action_with(bar, QKeySequence(Qt::Key_Escape)));
    QVERIFY(action_with(bar, QKeySequence(QStringLiteral("Ctrl+,"))));
    QAction* cache = action_with(bar, QKeySequence(QStringLiteral("Ctrl+Shift+K")));
    QVERIFY(cache);
    QVERIFY(!app.window->cachePanel()->isVisible());
    cache->trigger();
    QVERIFY(app.window->cachePanel()->isVisible());
    QVERIFY(app.window->cachePanel()->text().contains("Blocks: 0"));
    for (QLabel* value : app.window->cachePanel()->findChildren<QLabel*>())
      if (value->buddy() == nullptr && value->textInteractionFlags() & Qt::TextSelectableByMouse)
        QVERIFY(!value->accessibleName().isEmpty());
    AppSettingsDialog* dialog = app.window->editAppSettings();
    for (QWidget* control : dialog->findChildren<QAbstractSpinBox*>())
      QVERIFY2(!control->accessibleName().isEmpty(), qPrintable(control->objectName()));
    QVERIFY(!dialog->dataDir()->accessibleName().isEmpty());
    for (QPushButton* button : dialog->findChildren<QPushButton*>())
      QVERIFY(!button->accessibleName().isEmpty() || !button->text().isEmpty());
    dialog->reject();
    // Ctrl+F puts the cursor in the search field.
    QApplication::setActiveWindow(app.window.get());
    QVERIFY(QTest::qWaitForWindowActive(app.window.get()));
    QTest::keyClick(app.window.get(), Qt::Key_F, Qt::ControlModifier);
    QTRY_VERIFY(app.window->sidebar()->searchField()->hasFocus());
  }

  // The conversation's text stays readable (WCAG 4.5:1) in both themes, the code block included,
  // and the choice is saved; System gives the platform's palette back.
  void darkThemeRepaintsTheConversationReadably() {
    const QPalette platform = QApplication::palette();
    SettingsApp app;
    MessageView* view = app.window->messageView();
    MessageRow question;
    question.text = QStringLiteral("Show me a loop.");
    MessageRow answer;
    answer.from_user = false;
    answer.thinking = QStringLiteral("The user wants C code.");
    answer.text = QStringLiteral("```\nfor (int i = 0; i < 3; ++i)\n  puts(\"hi\");\n```");
    view->addMessage(question);
    view->addMessage(answer);
    view->message(1)->setThinkingExpanded(true);

    for (ThemeChoice theme : {ThemeChoice::dark, ThemeChoice::light}) {
      const bool dark = theme == ThemeChoice::dark;
      app.window->themeAction(theme)->trigger();
      QTRY_COMPARE(is_dark(view->palette()), dark);
      QCOMPARE(is_dark(QApplication::palette()), dark);
      QVERIFY(app.window->themeAction(theme)->isChecked());
      for (int i : {0, 1}) {
        const MessageBubble* bubble = view->message(i);
        QVERIFY2(label_contrast(bubble, "body") >= 4.5, dark ? "dark body" : "light body");
      }
      QVERIFY(label_contrast(view->message(1), "thinking") >= 4.5);
      QVERIFY(contrast_ratio(error_color(QApplication::palette()),
                             QApplication::palette().color(QPalette::Window)) >= 4.5);
      QTest::qWait(100);  // the bubbles' throttled render
      auto* code = view->message(1)->findChild<QLabel*>(QStringLiteral("body"));
      const double lightness = mean_lightness(code->grab().toImage());
      qInfo("%s: code block mean lightness %.0f, answer contrast %.1f, thinking contrast %.1f",
            dark ? "dark" : "light", lightness, label_contrast(view->message(1), "body"),
            label_contrast(view->message(1), "thinking"));
      QVERIFY2(dark ? lightness < 90 : lightness > 170, qPrintable(QString::number(lightness)));
      QSettings saved(app.dir.filePath("flashdesk.conf"), QSettings::IniFormat);
      QCOMPARE(load_app_settings(saved).theme, theme);
    }
    app.window->themeAction(ThemeChoice::system)->trigger();
    for (QPalette::ColorRole role : {QPalette::Window, QPalette::WindowText, QPalette::Base})
      QCOMPARE(QApplication::palette().color(role), platform.color(role));
    QCOMPARE(is_dark(view->palette()), is_dark(platform));
  }

  // The theme is read at start: a new window over the same settings comes up dark.
  void storedThemeIsAppliedAtStart() {
    SettingsApp app;
    app.window->setTheme(ThemeChoice::dark);
    app.close();
    apply_theme(ThemeChoice::system);
    QVERIFY(!is_dark(QApplication::palette()));
    app.open();
    QVERIFY(is_dark(QApplication::palette()));
    QVERIFY(app.window->themeAction(ThemeChoice::dark)->isChecked());
  }
};

std::unique_ptr<QObject> make_app_settings_test() {
  return std::make_unique<AppSettingsTest>();
}

}  // namespace flashdesk::ui::test

#include "app_settings_test.moc"
