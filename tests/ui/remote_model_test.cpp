// A remote model entry against a real `flashdesk-cli serve` started by the test: the dialog lists
// the endpoint's models, the window chats with it like a local model (thinking and answer in the
// same widgets, the note that KV persistence does not apply), the history is resent (the server's
// cache serves it), a picture goes as a data URL, and the turns (the picture too) land in the
// sessions' SQLite file.
#include <QComboBox>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>

#include "storage/session_store.h"
#include "tests/ui/serving_app.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/composer.h"
#include "ui/message_bubble.h"
#include "ui/message_view.h"
#include "ui/remote_model_dialog.h"

namespace flashdesk::ui::test {

namespace {

const QString kModel = QStringLiteral(FD_SOURCE_DIR "/assets/models/flash-tiny");
const QString kSum = QStringLiteral("What is 4821 + 3377?");
const QString kImage = QStringLiteral(FD_SOURCE_DIR "/assets/eval/demo/images/image-0.png");
const QString kColour = QStringLiteral("What colour is the square?");

// `flashdesk-cli serve` on any free port, ended when destroyed.
class ServeProcess {
 public:
  ServeProcess() {
    // Live KV only: the test's subject is the app's side (and no data folder to clean up).
    process_.start(QStringLiteral(FD_CLI),
                   {"serve", "--model", kModel, "--port", "0", "--kv-store", "off"});
  }
  ~ServeProcess() {
    process_.terminate();  // SIGTERM: the server stops cleanly
    if (!process_.waitForFinished(10'000)) process_.kill();
  }
  // Waits for "serving NAME on http://127.0.0.1:PORT/v1"; the base URL, empty on failure.
  QString wait_base() {
    const QRegularExpression line(R"(serving \S+ on (http://127\.0\.0\.1:\d+/v1))");
    QString base;
    (void)QTest::qWaitFor(
        [&] {
          out_ += process_.readAllStandardOutput();
          const auto m = line.match(QString::fromUtf8(out_));
          if (m.hasMatch()) base = m.captured(1);
          return m.hasMatch() || process_.state() == QProcess::NotRunning;
        },
        60'000);
    if (base.isEmpty()) qWarning("serve: %s", process_.readAllStandardError().constData());
    return base;
  }

 private:
  QProcess process_;
  QByteArray out_;
};

}  // namespace

class RemoteModelTest : public QObject {
  Q_OBJECT

 private slots:
  void remoteEntryChatsAndStoresTheTurnsInSqlite() {
    ServeProcess server;
    const QString base = server.wait_base();
    QVERIFY(!base.isEmpty());
    ServingApp app{QString()};  // no local model: the remote one is the only one
    MainWindow& window = *app.window;

    // A model the endpoint does not list is refused, naming the ones it does.
    window.connectRemote({base, {}, QStringLiteral("no-such-model")});
    QTRY_VERIFY_WITH_TIMEOUT(window.modelError().contains("no-such-model"), 20'000);
    QVERIFY2(window.modelError().contains("flash-tiny"), qPrintable(window.modelError()));

    // File ▸ Remote models ▸ Add a remote model…: List models fills the id from /v1/models.
    RemoteModelDialog* dialog = window.addRemoteModel();
    QVERIFY(dialog->findChild<QLabel*>("remoteKvNote")->text().contains("fast resume"));
    dialog->url()->setText(base);
    QTest::mouseClick(dialog->listButton(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(dialog->model()->currentText(), QStringLiteral("flash-tiny"), 20'000);
    QCOMPARE(dialog->model()->count(), 1);
    dialog->accept();
    QTRY_VERIFY_WITH_TIMEOUT(window.modelName().startsWith("Model: flash-tiny (remote"), 20'000);
    QVERIFY(window.remoteNote().contains("KV persistence and fast resume do not apply"));
    QCOMPARE(load_remote_entries(app.store).front(),
             (RemoteEntry{base, {}, QStringLiteral("flash-tiny")}));

    // Two turns; the second resends the first, which the server finds in its cache.
    QSignalSpy finished(app.controller->worker(), &ChatWorker::answerFinished);
    app.type_and_send(kSum);
    QVERIFY(app.wait_turn());
    QVERIFY2(window.composer()->errorText().isEmpty(), qPrintable(window.composer()->errorText()));
    const MessageView* view = window.messageView();
    QCOMPARE(view->messageCount(), 2);
    const QString answer = view->message(1)->text();
    const QString thinking = view->message(1)->thinking();
    QVERIFY(!answer.isEmpty());
    QVERIFY(!thinking.isEmpty());  // streamed into the same thinking widget
    QVERIFY2(window.effortLine().contains("Reasoning Effort: 75"), qPrintable(window.effortLine()));
    app.type_and_send(QStringLiteral("What is 12 + 30?"));
    QVERIFY(app.wait_turn());
    QCOMPARE(view->messageCount(), 4);
    QCOMPARE(finished.count(), 2);
    const auto first = finished[0][1].value<TurnStats>();
    const auto second = finished[1][1].value<TurnStats>();
    QVERIFY(first.generated_tokens > 0);
    QVERIFY(second.prompt_tokens > first.prompt_tokens);  // the history went with it
    QVERIFY2(second.reused_tokens > 0, "the server reused none of the resent history");
    qInfo("remote turns: %lld prompt / %lld reused, then %lld / %lld",
          (long long)first.prompt_tokens, (long long)first.reused_tokens,
          (long long)second.prompt_tokens, (long long)second.reused_tokens);

    // The same question straight to the server, as the app's turn settings say (effort 75 is
    // "high", thinking on, greedy): the app's answer is the server's.
    const QJsonObject direct{
        {"model", "flash-tiny"},
        {"reasoning_effort", "high"},
        {"thinking", QJsonObject{{"type", "enabled"}}},
        {"max_tokens", 4096},
        {"messages", QJsonArray{QJsonObject{{"role", "user"}, {"content", kSum}}}}};
    Curl curl(chat_post(base, direct));
    QVERIFY(curl.wait());
    QCOMPARE(curl.exit_code(), 0);
    const QJsonDocument reply = QJsonDocument::fromJson(curl.output());
    QCOMPARE(reply["choices"][0]["message"]["content"].toString(), answer);
    QCOMPARE(reply["choices"][0]["message"]["reasoning_content"].toString(), thinking);

    // A picture in a new chat: sent as a data URL (the server's answer to the same message is
    // the app's), stored with the message.
    const qint64 first_chat = window.currentSession();
    window.newSession();
    QTRY_VERIFY_WITH_TIMEOUT(window.currentSession() != 0 && window.currentSession() != first_chat,
                             10'000);
    QVERIFY(window.composer()->addImageFile(kImage));
    app.type_and_send(kColour);
    QVERIFY(app.wait_turn());
    QVERIFY2(window.composer()->errorText().isEmpty(), qPrintable(window.composer()->errorText()));
    QCOMPARE(view->messageCount(), 2);
    QCOMPARE(view->message(0)->imagePaths().size(), 1);
    const QString colour = view->message(1)->text();
    QVERIFY(!colour.isEmpty());
    QFile png(kImage);
    QVERIFY(png.open(QIODevice::ReadOnly));
    const QJsonArray parts{
        QJsonObject{
            {"type", "image_url"},
            {"image_url", QJsonObject{{"url", "data:image/png;base64," +
                                                  QString::fromLatin1(png.readAll().toBase64())}}}},
        QJsonObject{{"type", "text"}, {"text", kColour}}};
    QJsonObject with_image = direct;
    with_image["messages"] = QJsonArray{QJsonObject{{"role", "user"}, {"content", parts}}};
    Curl image_curl(chat_post(base, with_image));
    QVERIFY(image_curl.wait());
    QCOMPARE(image_curl.exit_code(), 0);
    QCOMPARE(
        QJsonDocument::fromJson(image_curl.output())["choices"][0]["message"]["content"].toString(),
        colour);

    // The sessions' SQLite file, read after the app is gone.
    const QString data_dir = app.settings.data_dir;
    app.window.reset();
    app.controller.reset();
    storage::SessionStore store(storage::StorageLayout::in(data_dir.toStdString()));
    const auto sessions = store.list_sessions();  // the most recent first
    QCOMPARE(sessions.size(), size_t(2));
    QVERIFY(QString::fromStdString(sessions[1].settings.model_fingerprint)
                .startsWith("remote:flash-tiny@" + base));
    const auto pictured = store.messages(sessions[0].id);
    QCOMPARE(pictured.size(), size_t(2));
    QCOMPARE(pictured[0].attachments.size(), size_t(1));
    QCOMPARE(pictured[0].attachments[0].mime_type, std::string("image/png"));
    QCOMPARE(pictured[0].attachments[0].byte_size, QFileInfo(kImage).size());
    QCOMPARE(QString::fromStdString(pictured[1].text), colour);
    const auto messages = store.messages(sessions[1].id);
    QCOMPARE(messages.size(), size_t(4));
    QCOMPARE(QString::fromStdString(messages[0].text), kSum);
    QVERIFY(messages[1].role == storage::Role::assistant);
    QCOMPARE(QString::fromStdString(messages[1].text), answer);
    QCOMPARE(QString::fromStdString(messages[1].thinking), thinking);
    QVERIFY(messages[1].status == storage::MessageStatus::complete);
    QVERIFY(messages[1].end.thinking_ms >= 0);
    QCOMPARE(QString::fromStdString(messages[2].text), QStringLiteral("What is 12 + 30?"));
    QVERIFY(!messages[3].text.empty());
  }

  // An endpoint that cannot be reached: the error says so and the local model stays loaded and
  // answers.
  void unreachableEndpointKeepsTheLocalModel() {
    ServingApp app{kModel};
    MainWindow& window = *app.window;
    QVERIFY(QTest::qWaitFor([&] { return window.modelName().startsWith("Model:"); }, 60'000));
    const QString local = window.modelName();
    window.connectRemote({QStringLiteral("http://127.0.0.1:1/v1"), {}, QStringLiteral("any")});
    QTRY_VERIFY_WITH_TIMEOUT(window.modelError().contains("cannot reach"), 20'000);
    QTRY_COMPARE_WITH_TIMEOUT(window.modelName(), local, 5'000);
    QVERIFY(window.remoteNote().isEmpty());
    app.type_and_send(kSum);
    QVERIFY(app.wait_turn());
    QVERIFY2(window.composer()->errorText().isEmpty(), qPrintable(window.composer()->errorText()));
    QCOMPARE(window.messageView()->messageCount(), 2);
    QVERIFY(!window.messageView()->message(1)->text().isEmpty());
  }
};

std::unique_ptr<QObject> make_remote_model_test() {
  return std::make_unique<RemoteModelTest>();
}

}  // namespace flashdesk::ui::test

#include "remote_model_test.moc"
