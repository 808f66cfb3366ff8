// The app's API server key (File ▸ Settings): the dialog refuses an address other than loopback
// without a key; the app serving the real demo model on every address (0.0.0.0) with a key
// answers 401 to a request without it or with a wrong one and serves the right one; the worker
// refuses to listen beyond loopback without a key, as `flashdesk-cli serve` does.
#include <QAction>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSignalSpy>

#include "tests/ui/serving_app.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/app_settings_dialog.h"

namespace flashdesk::ui::test {

namespace {

const QString kModel = QStringLiteral(FD_SOURCE_DIR "/assets/models/flash-tiny");
const QString kKey = QStringLiteral("app-key-7f3a");

// The port in "Serving NAME on http://HOST:PORT/v1"; 0 when the text has none.
int served_port(const QString& status) {
  const auto m = QRegularExpression(R"(http://[^:/]+:(\d+)/v1)").match(status);
  return m.hasMatch() ? m.captured(1).toInt() : 0;
}

// curl's HTTP status for `args` (the body discarded); -1 when curl failed.
int http_status(QStringList args) {
  Curl curl(QStringList{"-o", "/dev/null", "-w", "%{http_code}"} + args);
  if (!curl.wait() || curl.exit_code() != 0) return -1;
  return curl.output().toInt();
}

QStringList bearer(const QString& key) {
  return {"-H", "Authorization: Bearer " + key};
}

}  // namespace

class ServerKeyTest : public QObject {
  Q_OBJECT

 private slots:
  void settingsRefuseAnOpenAddressWithoutAKey() {
    ServingApp app({});
    AppSettingsDialog* dialog = app.window->editAppSettings();
    dialog->serverHost()->setText(QStringLiteral("0.0.0.0"));
    dialog->serverApiKey()->clear();
    dialog->accept();
    QVERIFY(dialog->isVisible());  // refused: stays open and says why
    QVERIFY(dialog->serverProblem()->isVisible());
    QVERIFY(dialog->serverProblem()->text().contains("API key"));
    QVERIFY(load_app_settings(app.store).server_host == QStringLiteral("127.0.0.1"));

    dialog->serverApiKey()->setText(kKey);
    dialog->accept();
    QTRY_VERIFY(!dialog->isVisible());
    const AppSettings saved = load_app_settings(app.store);
    QCOMPARE(saved.server_host, QStringLiteral("0.0.0.0"));
    QCOMPARE(saved.server_api_key, kKey);

    // A settings file with an open address and no key falls back to loopback, saying so.
    app.store.setValue("server/api_key", QString());
    QStringList problems;
    QCOMPARE(load_app_settings(app.store, &problems).server_host, QStringLiteral("127.0.0.1"));
    QVERIFY2(problems.join('\n').contains("server/host"), qPrintable(problems.join('\n')));
  }

  void keyIsRequiredOnEveryAddress() {
    ServingApp app(kModel, 0, QStringLiteral("0.0.0.0"), kKey);
    MainWindow& window = *app.window;
    QVERIFY(QTest::qWaitFor([&] { return window.modelName().startsWith("Model:"); }, 60'000));
    QSignalSpy started(app.controller->worker(), &ChatWorker::servingStarted);
    window.serveAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 10'000);
    QTRY_VERIFY(window.serverStatus().contains("0.0.0.0"));
    const int port = served_port(window.serverStatus());
    QVERIFY2(port > 0, qPrintable(window.serverStatus()));
    const QString base = QStringLiteral("http://127.0.0.1:%1/v1").arg(port);

    QCOMPARE(http_status({base + "/models"}), 401);
    QCOMPARE(http_status(QStringList{base + "/models"} + bearer("app-key-7f3b")), 401);
    QCOMPARE(http_status(QStringList{base + "/models"} + bearer(kKey + "x")), 401);
    QCOMPARE(http_status(QStringList{base + "/models"} + bearer(kKey)), 200);

    const QJsonObject ask{
        {"model", "flash-tiny"},
        {"max_tokens", 32},
        {"thinking", QJsonObject{{"type", "disabled"}}},
        {"messages", QJsonArray{QJsonObject{{"role", "user"}, {"content", "What is my name?"}}}}};
    QCOMPARE(http_status(chat_post(base, ask)), 401);
    Curl answer(chat_post(base, ask) + bearer(kKey));
    QVERIFY(answer.wait());
    QCOMPARE(answer.exit_code(), 0);
    const QJsonDocument reply = QJsonDocument::fromJson(answer.output());
    QVERIFY2(!reply["choices"][0]["message"]["content"].toString().isEmpty(),
             answer.output().constData());
  }

  void workerRefusesAnOpenAddressWithoutAKey() {
    ServingApp app(kModel);
    MainWindow& window = *app.window;
    QVERIFY(QTest::qWaitFor([&] { return window.modelName().startsWith("Model:"); }, 60'000));
    QSignalSpy failed(app.controller->worker(), &ChatWorker::servingFailed);
    app.controller->setServing(true, 0, QStringLiteral("0.0.0.0"), {});
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10'000);
    QVERIFY2(failed.front().front().toString().contains("API key"),
             qPrintable(failed.front().front().toString()));
    QVERIFY(window.serverStatus().isEmpty());
  }
};

std::unique_ptr<QObject> make_server_key_test() {
  return std::make_unique<ServerKeyTest>();
}

}  // namespace flashdesk::ui::test

#include "server_key_test.moc"
