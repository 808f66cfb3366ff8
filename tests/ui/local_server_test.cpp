// File ▸ Serve on localhost on the real demo model: the switch starts the OpenAI-compatible server
// inside the app on the engine the window uses, curl gets answers from it (alone, and while the
// window chats: the two queue for the engine and both complete), the status bar names the URL,
// and switching it off closes the port.
#include <QAction>
#include <QJsonArray>
#include <QRegularExpression>
#include <QSignalSpy>

#include "tests/ui/serving_app.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/composer.h"
#include "ui/message_bubble.h"
#include "ui/message_view.h"

namespace flashdesk::ui::test {

namespace {

const QString kModel = QStringLiteral(FD_SOURCE_DIR "/assets/models/flash-tiny");
const QString kQuestion = QStringLiteral("Hi! My name is Quinn.");

QJsonObject quinn_request(bool stream) {
  return {{"model", "flash-tiny"},
          {"stream", stream},
          {"max_tokens", 64},
          {"thinking", QJsonObject{{"type", "disabled"}}},
          {"messages", QJsonArray{QJsonObject{{"role", "user"}, {"content", kQuestion}}}}};
}

// The answer text of a streamed response: its content deltas, in order; `finished` is set when a
// chunk carried a finish reason (the stream was not cut).
QString streamed_content(const QByteArray& sse, bool* finished) {
  QString content;
  *finished = false;
  for (const QByteArray& line : sse.split('\n')) {
    if (!line.startsWith("data: ") || line == "data: [DONE]") continue;
    const QJsonObject chunk = QJsonDocument::fromJson(line.mid(6)).object();
    for (const QJsonValue& choice : chunk["choices"].toArray()) {
      content += choice["delta"]["content"].toString();
      if (choice["finish_reason"].isString()) *finished = true;
    }
  }
  return content;
}

// The port in "Serving NAME on http://127.0.0.1:PORT/v1"; 0 when the text has none.
int served_port(const QString& status) {
  const auto m = QRegularExpression(R"(http://127\.0\.0\.1:(\d+)/v1)").match(status);
  return m.hasMatch() ? m.captured(1).toInt() : 0;
}

}  // namespace

class LocalServerTest : public QObject {
  Q_OBJECT

 private slots:
  void switchServesTheLoadedModelAndClosesThePort() {
    ServingApp app(kModel);
    MainWindow& window = *app.window;
    QVERIFY(QTest::qWaitFor([&] { return window.modelName().startsWith("Model:"); }, 60'000));
    QVERIFY(window.serverStatus().isEmpty());
    QSignalSpy started(app.controller->worker(), &ChatWorker::servingStarted);
    window.serveAction()->trigger();                        // File ▸ Serve on localhost
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 10'000);  // the worker may emit before a wait()
    QTRY_VERIFY(!window.serverStatus().isEmpty());
    const int port = served_port(window.serverStatus());
    QVERIFY2(port > 0, qPrintable(window.serverStatus()));
    QVERIFY(window.serverStatus().contains("flash-tiny"));
    QVERIFY(load_app_settings(app.store).serve);  // the switch is remembered
    const QString base = QStringLiteral("http://127.0.0.1:%1/v1").arg(port);

    Curl models({base + "/models"});
    QVERIFY(models.wait());
    QCOMPARE(models.exit_code(), 0);
    QCOMPARE(QJsonDocument::fromJson(models.output())["data"][0]["id"].toString(),
             QStringLiteral("flash-tiny"));

    // Alone: the whole answer, from the model the window loaded.
    Curl alone(chat_post(base, quinn_request(false)));
    QVERIFY(alone.wait());
    QCOMPARE(alone.exit_code(), 0);
    const QJsonDocument answer = QJsonDocument::fromJson(alone.output());
    const QString content = answer["choices"][0]["message"]["content"].toString();
    QVERIFY2(content.contains("Quinn"), alone.output().constData());
    QVERIFY(answer["usage"]["completion_tokens"].toInt() > 0);

    // While the window chats: the API's stream and the window's turn wait for each other on the
    // one engine; both complete, and the API's answer is the one it got alone.
    Curl streamed(chat_post(base, quinn_request(true)));
    app.type_and_send(QStringLiteral("What is 12 + 30?"));
    QVERIFY(streamed.wait());
    QVERIFY(app.wait_turn());
    QCOMPARE(streamed.exit_code(), 0);
    bool finished = false;
    QCOMPARE(streamed_content(streamed.output(), &finished), content);
    QVERIFY(finished);
    QVERIFY2(app.window->composer()->errorText().isEmpty(),
             qPrintable(app.window->composer()->errorText()));
    const MessageView* view = window.messageView();
    QCOMPARE(view->messageCount(), 2);
    QVERIFY(!view->message(1)->text().isEmpty());
    QVERIFY(view->message(1)->note().isEmpty());  // complete, not stopped or interrupted

    // Off: the server stops and its port is closed (curl: "couldn't connect", exit code 7).
    QSignalSpy stopped(app.controller->worker(), &ChatWorker::servingStopped);
    window.serveAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(stopped.count(), 1, 30'000);
    QTRY_VERIFY(window.serverStatus().isEmpty());
    QVERIFY(!load_app_settings(app.store).serve);
    Curl refused({base + "/models"});
    QVERIFY(refused.wait());
    QCOMPARE(refused.exit_code(), 7);

    // The window's chat goes on on the same engine.
    app.type_and_send(kQuestion);
    QVERIFY(app.wait_turn());
    QCOMPARE(view->messageCount(), 4);
    QVERIFY(!view->message(3)->text().isEmpty());
    QVERIFY(view->message(3)->note().isEmpty());
  }

  // Off while an API answer is being written and a window turn waits behind it: the answer ends
  // after its current token (the switch interrupts it from the GUI thread) rather than running to
  // its end, then the window's turn runs.
  void switchingOffEndsTheApiAnswerInFlight() {
    ServingApp app(kModel);
    MainWindow& window = *app.window;
    QVERIFY(QTest::qWaitFor([&] { return window.modelName().startsWith("Model:"); }, 60'000));
    window.serveAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!window.serverStatus().isEmpty(), 10'000);
    const QString base =
        QStringLiteral("http://127.0.0.1:%1/v1").arg(served_port(window.serverStatus()));
    // Sampled at temperature 2 with a fixed seed: over a hundred tokens before the end.
    QJsonObject request{
        {"model", "flash-tiny"},
        {"temperature", 2},
        {"seed", 7},
        {"max_tokens", 3000},
        {"thinking", QJsonObject{{"type", "disabled"}}},
        {"messages", QJsonArray{QJsonObject{{"role", "user"},
                                            {"content", "Tell me a long story about the sea."}}}}};
    Curl alone(chat_post(base, request));
    QVERIFY(alone.wait());
    const int whole = QJsonDocument::fromJson(alone.output())["usage"]["completion_tokens"].toInt();
    QVERIFY2(whole > 50, alone.output().constData());

    request["stream"] = true;
    request["stream_options"] = QJsonObject{{"include_usage", true}};
    Curl streamed(chat_post(base, request));
    QVERIFY(QTest::qWaitFor([&] { return streamed.output().count("data: ") >= 3; }, 30'000));
    // A window turn queued behind the API's answer keeps the worker waiting for the engine: the
    // switch must reach the server without going through the worker.
    app.type_and_send(QStringLiteral("What is 12 + 30?"));
    QSignalSpy stopped(app.controller->worker(), &ChatWorker::servingStopped);
    window.serveAction()->trigger();  // off, mid-answer
    QVERIFY(streamed.wait());
    QTRY_COMPARE_WITH_TIMEOUT(stopped.count(), 1, 30'000);
    QVERIFY(app.wait_turn());
    QCOMPARE(window.messageView()->messageCount(), 2);
    QVERIFY(!window.messageView()->message(1)->text().isEmpty());
    int generated = -1;
    for (const QByteArray& line : streamed.output().split('\n'))
      if (line.startsWith("data: {") && line.contains("\"usage\""))
        generated = QJsonDocument::fromJson(line.mid(6))["usage"]["completion_tokens"].toInt();
    qInfo("the answer alone: %d tokens; switched off after the first: %d", whole, generated);
    QVERIFY2(generated >= 1 && generated < whole, streamed.output().constData());
  }

  // A port another program holds: the switch goes back off and the status line says why.
  void aTakenPortTurnsTheSwitchOffWithTheReason() {
    ServingApp app(kModel);
    MainWindow& window = *app.window;
    QVERIFY(QTest::qWaitFor([&] { return window.modelName().startsWith("Model:"); }, 60'000));
    window.serveAction()->trigger();
    QTRY_VERIFY(!window.serverStatus().isEmpty());
    const int taken = served_port(window.serverStatus());

    ServingApp second(kModel, taken);
    MainWindow& other = *second.window;
    QVERIFY(QTest::qWaitFor([&] { return other.modelName().startsWith("Model:"); }, 60'000));
    QSignalSpy failed(second.controller->worker(), &ChatWorker::servingFailed);
    other.serveAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10'000);
    QVERIFY2(failed.front().front().toString().contains(QString::number(taken)),
             qPrintable(failed.front().front().toString()));
    QTRY_VERIFY(!other.serveAction()->isChecked());
    QVERIFY(other.statusText().startsWith("Could not serve on localhost"));
    QVERIFY(!window.serverStatus().isEmpty());  // the first app still serves
  }
};

std::unique_ptr<QObject> make_local_server_test() {
  return std::make_unique<LocalServerTest>();
}

}  // namespace flashdesk::ui::test

#include "local_server_test.moc"
