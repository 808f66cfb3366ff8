// What the serving and remote-model tests share: main()'s wiring (AppChatService, a settings file
// with the API server on any free port) in a temporary folder, and curl run without blocking the
// event loop (the window's worker keeps answering while a request is on its way).
#pragma once

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

#include "ui/app_chat_service.h"
#include "ui/app_settings.h"
#include "ui/chat_controller.h"
#include "ui/composer.h"
#include "ui/main_window.h"

namespace flashdesk::ui::test {

struct ServingApp {
  QTemporaryDir dir;
  QSettings store{dir.filePath("flashdesk.conf"), QSettings::IniFormat};
  AppSettings settings;
  std::unique_ptr<ChatController> controller;
  std::unique_ptr<MainWindow> window;

  // `model_dir` empty: no local model is loaded. Port 0: any free port (tests run side by side).
  explicit ServingApp(const QString& model_dir, int server_port = 0,
                      const QString& server_host = QStringLiteral("127.0.0.1"),
                      const QString& server_api_key = {}) {
    AppSettings configured;
    configured.data_dir = dir.filePath("data");
    configured.server_port = server_port;
    configured.server_host = server_host;
    configured.server_api_key = server_api_key;
    save_app_settings(store, configured);
    settings = load_app_settings(store);
    const auto layout = storage_layout(settings);
    controller = std::make_unique<ChatController>(
        std::make_unique<AppChatService>(persistent_chat_options(settings, layout)), layout);
    window = std::make_unique<MainWindow>(*controller, model_dir, &store);
    window->show();
  }
  ~ServingApp() {
    window.reset();  // the window goes first: it refers to the controller
    controller.reset();
  }
  void type_and_send(const QString& text) const {
    QTest::keyClicks(window->composer()->edit(), text);
    QTest::keyClick(window->composer()->edit(), Qt::Key_Return);
  }
  bool wait_turn() const {
    return QTest::qWaitFor([&] { return !window->generating(); }, 120'000);
  }
};

// A curl process; the event loop runs while it does.
class Curl {
 public:
  explicit Curl(const QStringList& args) {
    process_.start(QStringLiteral("curl"), QStringList{"-sS", "--max-time", "100"} + args);
  }
  bool wait() {
    return QTest::qWaitFor([&] { return process_.state() == QProcess::NotRunning; }, 110'000);
  }
  int exit_code() const { return process_.exitCode(); }
  QByteArray output() { return out_ += process_.readAllStandardOutput(); }
  QByteArray errors() { return process_.readAllStandardError(); }

 private:
  QProcess process_;
  QByteArray out_;
};

// A POST of `body` to the chat completions of the API at `base` (http://HOST:PORT/v1).
inline QStringList chat_post(const QString& base, const QJsonObject& body) {
  return {base + "/chat/completions", "-H", "Content-Type: application/json", "--data-binary",
          QString::fromUtf8(QJsonDocument(body).toJson(QJsonDocument::Compact))};
}

}  // namespace flashdesk::ui::test
