// `flashdesk`: the desktop app. Wiring only: options, settings, the data folder, the worker, the
// window. `--help`, `--version` and a bad command line are answered before the GUI starts, so
// they work without a display (a QCoreApplication, not a QApplication).
#include <QApplication>
#include <QCommandLineParser>
#include <QMessageBox>
#include <QSettings>
#include <optional>

#include "ui/app_settings.h"
#include "ui/chat_controller.h"
#include "ui/main_window.h"
#include "ui/model_locator.h"
#include "ui/persistent_chat_service.h"

namespace {

struct AppOptions {
  QString model;                   // empty: the bundled demo
  QString data_dir;                // empty: the settings' data folder
  std::optional<QString> backend;  // unset: the settings' backend
  std::optional<int> threads;      // unset: the settings' threads
};

// The command line, declared once for both the display-less check and the real parse.
struct CommandLine {
  QCommandLineParser parser;
  QCommandLineOption help = parser.addHelpOption();
  QCommandLineOption version = parser.addVersionOption();
  QCommandLineOption model{{"m", "model"}, "Model folder (default: the bundled demo).", "dir"};
  QCommandLineOption data{
      "data-dir", "Sessions and KV cache folder for this run (default: File > Settings).", "dir"};
  QCommandLineOption backend{
      "backend",
      "Compute backend for this run: " + flashdesk::ui::backend_choices().join(", ") +
          " (default: File > Settings).",
      "name"};
  QCommandLineOption threads{
      "threads", "CPU threads for this run, 0: every core (default: File > Settings).", "n"};

  CommandLine() {
    parser.setApplicationDescription(QStringLiteral("FlashDesk: chat with a local model."));
    parser.addOptions({model, data, backend, threads});
  }
  AppOptions options() const {
    AppOptions o{parser.value(model), parser.value(data), std::nullopt, std::nullopt};
    if (parser.isSet(backend)) o.backend = parser.value(backend);
    if (parser.isSet(threads)) o.threads = parser.value(threads).toInt();
    return o;
  }
};

void name_the_app() {
  QCoreApplication::setOrganizationName(QStringLiteral("FlashDesk"));
  QCoreApplication::setApplicationName(QStringLiteral("FlashDesk"));
  QCoreApplication::setApplicationVersion(QStringLiteral("0.1.0"));
}

// True when the command line only asks for text (help, version) or is wrong: then it is answered
// on a QCoreApplication, which needs no display, and the process exits.
bool answers_without_gui(int argc, char** argv) {
  QStringList args;
  for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
  CommandLine line;
  return !line.parser.parse(args) || line.parser.isSet(line.help) ||
         line.parser.isSet(line.version) || line.parser.isSet(QStringLiteral("help-all"));
}

int answer_without_gui(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  name_the_app();
  CommandLine line;
  line.parser.process(app);  // prints help, the version or the error, and exits
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (answers_without_gui(argc, argv)) return answer_without_gui(argc, argv);
  QApplication app(argc, argv);
  name_the_app();
  CommandLine line;
  line.parser.process(app);
  AppOptions options = line.options();
  if (options.model.isEmpty())
    options.model = flashdesk::ui::default_model_dir(app.applicationDirPath());

  QSettings settings;  // ~/.config/FlashDesk/FlashDesk.conf
  flashdesk::ui::AppSettings app_settings = flashdesk::ui::load_app_settings(settings);
  if (!options.data_dir.isEmpty()) app_settings.data_dir = options.data_dir;  // this run only
  flashdesk::storage::StorageLayout layout;
  try {
    layout = flashdesk::ui::storage_layout(app_settings);
  } catch (const std::exception& e) {
    QMessageBox::critical(nullptr, QStringLiteral("FlashDesk"), QString::fromUtf8(e.what()));
    return 1;
  }
  // The settings' device, or the command line's for this run only (like --data-dir); a later
  // change in the settings dialog applies at the next model load.
  flashdesk::EngineOptions engine;
  engine.backend = options.backend.value_or(app_settings.backend).toStdString();
  engine.threads = options.threads.value_or(app_settings.threads);
  // Turns go through the persistent sessions layer: a restart resumes with the KV from the SSD,
  // within the SSD and window-pool budgets of the settings.
  flashdesk::ui::ChatController controller(
      std::make_unique<flashdesk::ui::PersistentChatService>(
          flashdesk::ui::persistent_chat_options(app_settings, layout), engine),
      layout);
  flashdesk::ui::MainWindow window(controller, options.model, &settings);
  window.show();
  return app.exec();
}
