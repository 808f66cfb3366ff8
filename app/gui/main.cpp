// `flashdesk`: the desktop app. Wiring only: options, the data folder, the worker, the window.
#include <QApplication>
#include <QCommandLineParser>
#include <QMessageBox>

#include "engine/runtime/backend_factory.h"
#include "storage/storage_layout.h"
#include "ui/chat_controller.h"
#include "ui/main_window.h"
#include "ui/model_locator.h"
#include "ui/persistent_chat_service.h"

namespace {

struct AppOptions {
  QString model;
  QString data_dir;
  QString backend = QStringLiteral("cpu");
  int threads = 0;
};

AppOptions parse_options(const QApplication& app) {
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("FlashDesk: chat with a local model."));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption model({"m", "model"}, "Model folder (default: the bundled demo).",
                                 "dir");
  const QCommandLineOption data("data-dir", "Sessions and KV cache folder.", "dir");
  QStringList backends;
  for (const std::string& name : flashdesk::backend_names())
    backends << QString::fromStdString(name);
  const QCommandLineOption backend("backend", "Compute backend: " + backends.join(", ") + ".",
                                   "name", "cpu");
  const QCommandLineOption threads("threads", "CPU threads (0: every core).", "n", "0");
  parser.addOptions({model, data, backend, threads});
  parser.process(app);
  AppOptions options;
  options.model = parser.isSet(model) ? parser.value(model)
                                      : flashdesk::ui::default_model_dir(app.applicationDirPath());
  options.data_dir = parser.value(data);
  options.backend = parser.value(backend);
  options.threads = parser.value(threads).toInt();
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("FlashDesk"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
  const AppOptions options = parse_options(app);
  flashdesk::storage::StorageLayout layout;
  try {
    layout = options.data_dir.isEmpty()
                 ? flashdesk::storage::StorageLayout::from_environment()
                 : flashdesk::storage::StorageLayout::in(options.data_dir.toStdString());
  } catch (const std::exception& e) {
    QMessageBox::critical(nullptr, QStringLiteral("FlashDesk"), QString::fromUtf8(e.what()));
    return 1;
  }
  flashdesk::EngineOptions engine;
  engine.backend = options.backend.toStdString();
  engine.threads = options.threads;
  // Turns go through the persistent sessions layer: a restart resumes with the KV from the SSD.
  flashdesk::ui::ChatController controller(
      std::make_unique<flashdesk::ui::PersistentChatService>(
          flashdesk::storage::PersistentChatOptions{.layout = layout}, engine),
      layout);
  flashdesk::ui::MainWindow window(controller, options.model);
  window.show();
  return app.exec();
}
