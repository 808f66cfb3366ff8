// `flashdesk`: the desktop app. Wiring only: options, settings, the data folder, the worker, the
// window. `--help`, `--version` and a bad command line are answered before the GUI starts, so
// they work without a display (a QCoreApplication, not a QApplication).
#include <QApplication>
#include <QCommandLineParser>
#include <QMessageBox>
#include <QSettings>
#include <QTimer>
#include <cstdio>
#include <optional>

#include "ui/app_chat_service.h"
#include "ui/app_settings.h"
#include "ui/chat_controller.h"
#include "ui/main_window.h"
#include "ui/model_locator.h"

namespace {

struct AppOptions {
  QString model;                   // empty: the bundled demo
  QString data_dir;                // empty: the settings' data folder
  std::optional<QString> backend;  // unset: the settings' backend
  std::optional<int> threads;      // unset: the settings' threads
  bool smoke_test = false;         // quit once the model loaded (or failed)
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
  QCommandLineOption smoke{"smoke-test",
                           "Quit once the model has loaded: exit code 0, or 1 when it failed "
                           "(checks an installed app, e.g. on the offscreen platform)."};

  CommandLine() {
    parser.setApplicationDescription(QStringLiteral("FlashDesk: chat with a local model."));
    parser.addOptions({model, data, backend, threads, smoke});
  }
  AppOptions options() const {
    AppOptions o{parser.value(model), parser.value(data), std::nullopt, std::nullopt};
    if (parser.isSet(backend)) o.backend = parser.value(backend);
    if (parser.isSet(threads)) o.threads = parser.value(threads).toInt();
    o.smoke_test = parser.isSet(smoke);
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

// --smoke-test: the exit code says whether the model loaded, within two minutes. Connected before
// the window asks for the load; the worker's signals arrive queued once the event loop runs.
void quit_when_model_settles(flashdesk::ui::ChatWorker* worker) {
  using flashdesk::ui::ChatWorker;
  QObject::connect(worker, &ChatWorker::modelLoaded, qApp,
                   [](const QString& name, const QString& directory, const QString& backend) {
                     std::printf("smoke test: loaded %s from %s on %s\n", qPrintable(name),
                                 qPrintable(directory), qPrintable(backend));
                     QCoreApplication::exit(0);
                   });
  QObject::connect(worker, &ChatWorker::modelFailed, qApp,
                   [](const QString& directory, const QString& message) {
                     std::fprintf(stderr, "smoke test: %s did not load: %s\n",
                                  qPrintable(directory), qPrintable(message));
                     QCoreApplication::exit(1);
                   });
  QObject::connect(worker, &ChatWorker::storageFailed, qApp, [](const QString& message) {
    std::fprintf(stderr, "smoke test: storage failed: %s\n", qPrintable(message));
    QCoreApplication::exit(1);
  });
  QTimer::singleShot(120'000, qApp, [] {
    std::fprintf(stderr, "smoke test: no model loaded after two minutes\n");
    QCoreApplication::exit(1);
  });
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
  // within the SSD and window-pool budgets of the settings (or to a remote model, File ▸ Remote
  // models).
  flashdesk::ui::ChatController controller(
      std::make_unique<flashdesk::ui::AppChatService>(
          flashdesk::ui::persistent_chat_options(app_settings, layout), engine),
      layout);
  if (options.smoke_test) {
    if (options.model.isEmpty()) {
      std::fprintf(stderr, "smoke test: no model given and no bundled demo model found\n");
      return 1;
    }
    quit_when_model_settles(controller.worker());
  }
  flashdesk::ui::MainWindow window(controller, options.model, &settings);
  window.show();
  return app.exec();
}
