// Pictures in the whole app on the real demo model (assets/models/flash-tiny, CPU): sent and stored
// with the session, broken ones refused before anything is stored, and the whole story of the
// desktop-app issue with a picture: drop it, ask, quit, restart, continue with the KV from SSD.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "engine/util/error.h"
#include "storage/session_store.h"
#include "tests/ui/app_fixture.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/chat_worker.h"

namespace flashdesk::ui::test {

class ImageChatTest : public QObject {
  Q_OBJECT

 private slots:
  void imagesAreSentAndStoredWithTheSession() {
    QTemporaryDir data, files;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    const QString png = write_png(files.path(), QStringLiteral("chart.png"), 80, 60);
    QVERIFY(app.window->composer()->addImageFile(png));
    app.type_and_send(QStringLiteral("What does this chart show?"));
    QVERIFY(app.wait_turn());
    QVERIFY2(app.window->composer()->errorText().isEmpty(),
             qPrintable(app.window->composer()->errorText()));
    QVERIFY(app.window->composer()->attachments().isEmpty());  // sent with the message
    QCOMPARE(app.window->messageView()->messageCount(), 2);
    storage::SessionStore store(storage::StorageLayout::in(data.path().toStdString()));
    const auto messages = store.messages(app.window->currentSession());
    QCOMPARE(messages.size(), size_t{2});
    QCOMPARE(messages[0].attachments.size(), size_t{1});
    QCOMPARE(messages[0].attachments[0].mime_type, std::string("image/png"));
    QCOMPARE(messages[0].attachments[0].byte_size, QFileInfo(png).size());
  }

  // The whole story with a picture: drop it, ask, quit, restart, continue. The picture
  // comes back from the session store (its original file is gone by then) and the next turn reads
  // the image-bearing prefix's KV back from the SSD instead of encoding and prefilling it again.
  void anImageChatContinuesAfterRestartWithItsKvFromSsd() {
    QTemporaryDir data, files;
    const QString picture = QDir(files.path()).filePath(QStringLiteral("shapes.png"));
    QVERIFY(
        QFile::copy(QStringLiteral(FD_SOURCE_DIR "/assets/eval/demo/images/image-0.png"), picture));
    constexpr int64_t kBlock = 256;  // storage::KvBlockStoreOptions::tokens_per_block default
    qint64 session = 0;
    {
      App app(data.path(), kModel);
      QVERIFY(app.wait_model());
      QVERIFY(app.window->composer()->addImageFile(picture));
      app.type_and_send(long_question() + QStringLiteral(" How many shapes are there?"));
      QVERIFY(app.wait_turn());
      QVERIFY2(app.window->composer()->errorText().isEmpty(),
               qPrintable(app.window->composer()->errorText()));
      QCOMPARE(app.window->messageView()->messageCount(), 2);
      session = app.window->currentSession();
      // Its KV blocks are written in the background after the turn.
      QVERIFY(QTest::qWaitFor([&] { return kv_block_files(data.path()) > 0; }, 10'000));
    }
    QVERIFY(QFile::remove(picture));

    App app(data.path(), kModel);
    const MessageView* view = app.window->messageView();
    QVERIFY(QTest::qWaitFor([&] { return view->messageCount() == 2; }, 10'000));
    QCOMPARE(app.window->currentSession(), session);
    QCOMPARE(view->message(0)->imagePaths().size(), 1);  // shown from the store's copy
    QVERIFY(QFileInfo::exists(view->message(0)->imagePaths().front()));
    QVERIFY(app.wait_model());
    QSignalSpy finished(app.controller->worker(), &ChatWorker::answerFinished);
    app.type_and_send(QStringLiteral("Thank you."));
    QVERIFY(app.wait_turn());
    QCOMPARE(view->messageCount(), 4);
    QCOMPARE(finished.count(), 1);
    const TurnStats resumed = finished.at(0).at(1).value<TurnStats>();
    qInfo(
        "resumed image chat: prompt %lld, restored %lld from SSD in %.1f ms, replayed %lld, "
        "computed %lld",
        qlonglong(resumed.prompt_tokens), qlonglong(resumed.restored_tokens), resumed.restore_ms,
        qlonglong(resumed.replayed_tokens), qlonglong(resumed.computed_tokens));
    QVERIFY(resumed.restored_tokens >= kBlock);  // the block holding the picture included
    QCOMPARE(resumed.computed_tokens, resumed.prompt_tokens - resumed.restored_tokens);
    QVERIFY(resumed.computed_tokens < kBlock + 32);
    QVERIFY(app.window->statusText().contains(QStringLiteral("from SSD")));
  }

  // The service decodes the files in check(), before the worker shows or stores anything.
  void persistentServiceRefusesBrokenImagesBeforeStoring() {
    QTemporaryDir data, files;
    const auto layout = storage::StorageLayout::in(data.path().toStdString());
    PersistentChatService service(storage::PersistentChatOptions{.layout = layout},
                                  EngineOptions{.threads = 2});
    QVERIFY(service.load_model(kModel.toStdString(), {}).vision);
    TurnOptions options;
    options.mode = ThinkingMode::kChat;
    TurnRequest request;
    request.settings = service.chat()->settings_for(options);
    request.settings.max_new_tokens = 2;
    request.session_id = service.chat()->create_session("images", request.settings);
    request.text = "What is this?";
    const auto refused = [&](const QString& file) {
      request.images = {file.toStdString()};
      try {
        service.check(request);
      } catch (const InvalidRequest& e) {
        return QString::fromUtf8(e.what()).contains(file);
      }
      return false;
    };
    QVERIFY(refused(write_bytes(files.path(), QStringLiteral("broken.png"), "not a png at all")));
    QVERIFY(refused(files.filePath(QStringLiteral("missing.png"))));
    QVERIFY(service.chat()->messages().empty());

    request.images = {write_png(files.path(), QStringLiteral("ok.png"), 40, 30).toStdString()};
    service.check(request);
    const std::string preview = service.render_prompt(request);
    QVERIFY(QString::fromStdString(preview).contains("<｜deepseek_image｜>"));
    const TurnOutcome outcome = service.send(request, {}, nullptr);
    QCOMPARE(outcome.prompt_text, preview);  // one renderer: the preview is what was sent
    QCOMPARE(outcome.stats.computed_tokens, outcome.stats.prompt_tokens);
    const auto messages = service.chat()->messages();
    QCOMPARE(messages.size(), size_t{2});
    QCOMPARE(messages[0].attachments.size(), size_t{1});
  }
};

std::unique_ptr<QObject> make_image_chat_test() {
  return std::make_unique<ImageChatTest>();
}

}  // namespace flashdesk::ui::test

#include "image_chat_test.moc"
