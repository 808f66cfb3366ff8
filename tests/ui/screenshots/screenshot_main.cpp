// ui_screenshots: drives the real app on the demo model through a short scripted session and saves
// window grabs as PNGs (run by tools/screenshots.sh under Xvfb, or on the offscreen platform).
// Usage: ui_screenshots OUT_DIR [MODEL_DIR]
#include <QApplication>
#include <QDir>
#include <QMimeData>
#include <QSlider>
#include <QTemporaryDir>
#include <QTest>
#include <cstdio>

#include "storage/storage_layout.h"
#include "ui/app_settings_dialog.h"
#include "ui/cache_panel.h"
#include "ui/composer.h"
#include "ui/effort_control.h"
#include "ui/main_window.h"
#include "ui/message_bubble.h"
#include "ui/message_view.h"
#include "ui/persistent_chat_service.h"

namespace {

using flashdesk::ui::MainWindow;

bool wait_for(const std::function<bool()>& done, int ms = 120'000) {
  return QTest::qWaitFor(done, ms);
}

void save_widget(QWidget& widget, const QString& dir, const QString& name) {
  QTest::qWait(200);  // let the last throttled render and layout land
  const QString path = QDir(dir).filePath(name);
  if (!widget.grab().save(path)) qFatal("cannot write %s", qPrintable(path));
  std::printf("wrote %s\n", qPrintable(path));
}

void save(MainWindow& window, const QString& dir, const QString& name) {
  save_widget(window, dir, name);
}

bool ask(MainWindow& window, const QString& text) {
  QTest::keyClicks(window.composer()->edit(), text);
  QTest::keyClick(window.composer()->edit(), Qt::Key_Return);
  return wait_for([&] { return !window.generating(); });
}

QString sample_image(const QString& dir) {
  QImage image(320, 200, QImage::Format_RGB32);
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x)
      image.setPixel(x, y, qRgb(40 + x * 180 / 320, 90 + y * 120 / 200, 200 - x * 100 / 320));
  const QString path = QDir(dir).filePath("sunset.png");
  image.save(path);
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: ui_screenshots OUT_DIR [MODEL_DIR]\n");
    return 2;
  }
  const QString out = QString::fromLocal8Bit(argv[1]);
  const QString model = argc > 2 ? QString::fromLocal8Bit(argv[2])
                                 : QStringLiteral(FD_SOURCE_DIR "/assets/models/flash-tiny");
  QDir().mkpath(out);
  QTemporaryDir data, files;
  // The app's own service: sessions in SQLite, KV spilled to the (temporary) data folder.
  const auto layout = flashdesk::storage::StorageLayout::in(data.path().toStdString());
  flashdesk::ui::ChatController controller(
      std::make_unique<flashdesk::ui::PersistentChatService>(
          flashdesk::storage::PersistentChatOptions{.layout = layout}),
      layout);
  MainWindow window(controller, model);
  window.resize(1100, 720);
  window.show();
  if (!wait_for([&] { return window.modelName().startsWith("Model:"); })) qFatal("no model");
  save(window, out, "welcome.png");  // the first window: what the demo model can do

  // One chat of two turns: a greeting by name, then a sum with its thinking shown.
  if (!ask(window, "Hi! My name is Quinn.")) qFatal("no answer");
  if (!ask(window, "What is 4821 + 1367?")) qFatal("no answer");
  auto* view = window.messageView();
  view->message(view->messageCount() - 1)->setThinkingExpanded(true);
  save(window, out, "chat.png");
  // View ▸ Cache panel: it docks beside the chat without widening the window.
  window.cachePanel()->show();
  wait_for([&] { return window.cachePanel()->stats().turns == 2; }, 10'000);
  save(window, out, "cache-panel.png");
  window.cachePanel()->hide();
  // File ▸ Settings…: the new-chat defaults include effort and thinking.
  flashdesk::ui::AppSettingsDialog* settings = window.editAppSettings();
  QTest::qWait(200);
  save_widget(*settings, out, "settings.png");
  settings->reject();
  window.setTheme(flashdesk::ui::ThemeChoice::dark);  // View ▸ Theme ▸ Dark (not saved: no store)
  save(window, out, "chat-dark.png");
  window.setTheme(flashdesk::ui::ThemeChoice::system);

  // A picture question in a new chat: one of the demo eval's held-out pictures (4 shapes).
  window.newSession();
  window.composer()->addImageFile(
      QStringLiteral(FD_SOURCE_DIR "/assets/eval/demo/images/image-0.png"));
  if (!ask(window, "How many shapes are there?")) qFatal("no answer about the picture");
  save(window, out, "image-question.png");

  window.newSession();
  window.effortControl()->slider()->setValue(100);
  window.composer()->addImageFile(sample_image(files.path()));
  QFile broken(QDir(files.path()).filePath("scan.jpg"));
  if (!broken.open(QIODevice::WriteOnly) || broken.write("\xff\xd8\xff\xe0 cut short") < 0)
    qFatal("cannot write the broken image");
  broken.close();
  window.composer()->addImageFile(broken.fileName());
  window.composer()->setText("你好！What does this picture show?");
  save(window, out, "composer-images.png");

  window.loadModel(QDir(files.path()).filePath("no-such-model"));
  wait_for([&] { return !window.modelError().isEmpty(); }, 30'000);
  save(window, out, "model-error.png");
  return 0;
}
