// The whole app on the real demo model (assets/models/flash-tiny, CPU): the effort line of the
// rendered prompt, streaming, GUI latency during generation, sessions surviving a restart, broken
// model folders, search / rename / delete. Pictures: image_chat_test.cpp.
#include <QAction>
#include <QCheckBox>
#include <QDialog>
#include <QDir>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <algorithm>
#include <filesystem>

#include <QDoubleSpinBox>
#include <QPlainTextEdit>
#include <QSpinBox>
#include "engine/runtime/conversation.h"
#include "engine/tokenizer/reasoning_effort.h"
#include "storage/kv_block_file.h"
#include "tests/ui/app_fixture.h"
#include "tests/ui/ui_test_classes.h"
#include "ui/composer.h"
#include "ui/effort_control.h"
#include "ui/main_window.h"
#include "ui/message_bubble.h"
#include "ui/message_view.h"
#include "ui/persistent_chat_service.h"
#include "ui/session_settings_dialog.h"
#include "ui/session_sidebar.h"

namespace flashdesk::ui::test {

class AppTest : public QObject {
  Q_OBJECT

 private slots:
  void aMessageSentRightAfterNewChatGoesToTheNewChat() {
    QTemporaryDir data;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    app.type_and_send(QStringLiteral("Hello, who are you?"));
    QVERIFY(app.wait_turn());
    const qint64 first = app.window->currentSession();
    QVERIFY(first != 0);
    app.window->newSession();  // no event loop turn before the next message: the worker has not
    app.type_and_send(QStringLiteral("What is 12 + 30?"));  // made the new chat yet
    QVERIFY(app.wait_turn());
    QVERIFY(
        QTest::qWaitFor([&] { return app.window->messageView()->messageCount() == 2; }, 10'000));
    const qint64 second = app.window->currentSession();
    QVERIFY(second != 0 && second != first);
    QVERIFY(app.window->messageView()->message(0)->text().contains("12 + 30"));
    app.window->openSession(first);  // the first chat kept its own exchange only
    const MessageView* view = app.window->messageView();
    QVERIFY(QTest::qWaitFor(
        [&] {
          return view->messageCount() > 0 && view->message(0)->text().contains("who are you");
        },
        10'000));
    QCOMPARE(view->messageCount(), 2);
  }

  // View > Model placement shows the planner's answer for the loaded model on this machine.
  void placementDialogShowsWhereTheModelLives() {
    QTemporaryDir data;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    auto* action = app.window->findChild<QAction*>(QStringLiteral("showPlacement"));
    QVERIFY(action);
    action->trigger();
    auto* dialog = app.window->findChild<QDialog*>(QStringLiteral("placementDialog"));
    QVERIFY(dialog);
    auto* text = dialog->findChild<QPlainTextEdit*>(QStringLiteral("placementText"));
    QVERIFY(text);
    const QString plan = text->toPlainText();
    QVERIFY2(plan.contains(QStringLiteral("placement of flash-tiny")), qPrintable(plan));
    QVERIFY2(plan.contains(QStringLiteral("routed experts")), qPrintable(plan));
    QVERIFY2(plan.contains(QStringLiteral("tokens/s")), qPrintable(plan));
    dialog->close();
  }

  void sliderChangesTheRenderedEffortLine() {
    QTemporaryDir data;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    EffortControl* effort = app.window->effortControl();
    const auto expect_line = [&](int value) {
      const QString line =
          QString::fromStdString(reasoning_effort_line(ReasoningEffort::of(value)));
      return QTest::qWaitFor([&] { return app.window->effortLine().endsWith(line); }, 10'000);
    };
    QVERIFY(expect_line(75));  // the default
    effort->slider()->setValue(30);
    QVERIFY2(expect_line(30), qPrintable(app.window->effortLine()));
    QTest::mouseClick(effort->presetButton(100), Qt::LeftButton);
    QVERIFY2(expect_line(100), qPrintable(app.window->effortLine()));
    QTest::mouseClick(effort->thinkingSwitch(), Qt::LeftButton);
    QVERIFY(QTest::qWaitFor([&] { return !app.window->effortLine().contains("Reasoning Effort"); },
                            10'000));
  }

  void sentMessageStreamsTokensIntoTheView() {
    QTemporaryDir data;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    QSignalSpy chunks(app.controller->worker(), &ChatWorker::answerText);
    app.type_and_send(QStringLiteral("Hello, who are you?"));
    QVERIFY(app.window->generating());
    QVERIFY(app.wait_turn());
    QVERIFY2(app.window->composer()->errorText().isEmpty(),
             qPrintable(app.window->composer()->errorText()));
    QCOMPARE(app.window->messageView()->messageCount(), 2);
    QVERIFY(app.window->messageView()->message(0)->fromUser());
    QString answer, thinking;
    for (const auto& args : chunks)
      (args.at(1).toBool() ? thinking : answer) += args.at(2).toString();
    QVERIFY2(chunks.count() > 3, "the answer arrived in one piece, not streamed");
    QVERIFY(!answer.isEmpty());
    QCOMPARE(app.last_message()->text(), answer);
    QCOMPARE(app.last_message()->thinking(), thinking);
    if (!thinking.isEmpty()) {
      QVERIFY(app.last_message()->thinkingTitle().startsWith("Thought for"));
      QVERIFY(!app.last_message()->thinkingExpanded());  // folded once the answer came
    }
    QVERIFY2(app.window->statusText().contains("tokens/s"), qPrintable(app.window->statusText()));
  }

  // "Sent:" shows the prompt the engine tokenised and prefilled, not a rendering made for the
  // preview: it is read back from the ids the model holds after the turn.
  void sentPromptIsWhatTheModelWasGiven() {
    QTemporaryDir data;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    for (const QString& question :
         {QStringLiteral("Hi! My name is Quinn."), QStringLiteral("What is my name?")}) {
      app.type_and_send(question);
      QVERIFY(app.wait_turn());
      const std::string prefilled = app.prefilled_text();
      const QString sent = app.window->sentPrompt();
      QVERIFY2(sent.endsWith(QStringLiteral("<｜Assistant｜><think>")), qPrintable(sent));
      QVERIFY2(sent.contains(question), qPrintable(sent));
      QCOMPARE(QString::fromStdString(prefilled + "<think>"), sent);
      const QString line = QString::fromStdString(find_effort_line(prefilled));
      QCOMPARE(line, QString::fromStdString(reasoning_effort_line(ReasoningEffort::of(75))));
      QCOMPARE(app.window->effortLine(), QStringLiteral("Sent: ") + line);
    }
    // "Show prompt" opens the same text.
    QTest::mouseClick(app.window->findChild<QPushButton*>(QStringLiteral("showPrompt")),
                      Qt::LeftButton);
    auto* text = app.window->findChild<QPlainTextEdit*>(QStringLiteral("promptText"));
    QVERIFY(text != nullptr);
    QCOMPARE(text->toPlainText(), app.window->sentPrompt());
  }

  // The event loop must keep turning while the engine works: a 5 ms timer's gaps are measured
  // over whole turns on the slow reference backend (so the turns last seconds).
  void guiStaysResponsiveDuringGeneration() {
    QTemporaryDir data;
    EngineOptions slow;
    slow.backend = "cpu-reference";
    slow.threads = 1;
    App app(data.path(), kModel, slow);
    QVERIFY(app.wait_model());
    QElapsedTimer clock, generating;
    qint64 last = -1, busy_ms = 0;
    std::vector<qint64> gaps;
    QTimer ticker;
    ticker.setTimerType(Qt::PreciseTimer);
    ticker.setInterval(5);
    connect(&ticker, &QTimer::timeout, this, [&] {
      const qint64 now = clock.elapsed();
      if (app.window->generating() && last >= 0) gaps.push_back(now - last);
      last = now;
    });
    clock.start();
    ticker.start();
    // Baseline: the same timer with the model loaded and idle, for the ratio below.
    std::vector<qint64> idle;
    {
      QElapsedTimer idle_clock;
      idle_clock.start();
      qint64 idle_last = 0;
      while (idle_clock.elapsed() < 1000) {
        QTest::qWait(5);
        idle.push_back(idle_clock.elapsed() - idle_last);
        idle_last = idle_clock.elapsed();
      }
      std::sort(idle.begin(), idle.end());
    }
    for (const char* question : {"Hello, who are you?", "Tell me a long story about the sea."}) {
      generating.start();
      app.type_and_send(QString::fromUtf8(question));
      QVERIFY(app.wait_turn());
      busy_ms += generating.elapsed();
    }
    ticker.stop();
    QVERIFY2(gaps.size() > 20, "too few ticks measured");
    std::sort(gaps.begin(), gaps.end());
    const qint64 worst = gaps.back(), median = gaps[gaps.size() / 2];
    const qint64 p99 = gaps[gaps.size() * 99 / 100];
    qInfo(
        "GUI event-loop latency over %lld ms of generation (%zu ticks of a 5 ms timer): "
        "median %lld ms, p99 %lld ms, worst %lld ms; idle baseline: median %lld ms, worst "
        "%lld ms; worst/idle-worst %.1fx",
        busy_ms, gaps.size(), median, p99, worst, idle[idle.size() / 2], idle.back(),
        double(worst) / double(std::max<qint64>(1, idle.back())));
    QVERIFY2(busy_ms > 500, "the turns were too short to measure anything");
    QVERIFY2(worst < 100, qPrintable(QStringLiteral("worst gap %1 ms").arg(worst)));
  }

  // The first question is long: its prompt spans more than one KV block (256 tokens, the
  // default) and more than the 128-token sliding window, so the resumed turn must read blocks
  // back from the SSD and replay the window rather than recompute the conversation.
  void sessionAndMessagesComeBackAfterRestart() {
    QTemporaryDir data;
    qint64 session = 0;
    const QString question = long_question();
    QString answer;
    constexpr int64_t kBlock = 256;  // storage::KvBlockStoreOptions::tokens_per_block default
    TurnStats first;
    {
      App app(data.path(), kModel);
      QVERIFY(app.wait_model());
      QSignalSpy finished(app.controller->worker(), &ChatWorker::answerFinished);
      app.window->effortControl()->slider()->setValue(40);
      app.type_and_send(question);
      QVERIFY(app.wait_turn());
      QCOMPARE(finished.count(), 1);
      first = finished.at(0).at(1).value<TurnStats>();
      QVERIFY2(first.prompt_tokens > kBlock, qPrintable(QString::number(first.prompt_tokens)));
      QCOMPARE(first.restored_tokens, 0);  // a new session: everything computed
      QCOMPARE(first.computed_tokens, first.prompt_tokens);
      QCOMPARE(app.window->messageView()->messageCount(), 2);
      session = app.window->currentSession();
      answer = app.last_message()->text();
      QVERIFY(!answer.isEmpty());
    }
    // A stray copy of a block file outside its place: the restarted app's block store (which owns
    // the data folder once the model is loaded) sweeps it.
    const auto kv = storage::StorageLayout::in(data.path().toStdString()).kv_dir();
    std::filesystem::path block, stray;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kv)) {
      if (entry.path().extension() != storage::kBlockFileExtension) continue;
      block = entry.path();
      stray = kv / block.filename();  // its place is kv/<first two hex digits>/
      break;
    }
    QVERIFY(!block.empty());
    std::filesystem::copy_file(block, stray);
    App app(data.path(), kModel);
    QVERIFY2(
        QTest::qWaitFor([&] { return app.window->messageView()->messageCount() == 2; }, 10'000),
        qPrintable(QStringLiteral("%1 messages shown, session %2 of %3 listed")
                       .arg(app.window->messageView()->messageCount())
                       .arg(app.window->currentSession())
                       .arg(app.window->sidebar()->model()->rowCount())));
    QCOMPARE(app.window->currentSession(), session);
    QCOMPARE(app.window->sidebar()->model()->rowCount(), 1);
    QCOMPARE(app.window->sidebar()->model()->index(0).data(Qt::EditRole).toString(),
             question.simplified().left(48));
    QCOMPARE(app.window->messageView()->message(0)->text(), question);
    QCOMPARE(app.last_message()->text(), answer);
    QCOMPARE(app.window->effortControl()->choices().effort, 40);  // stored per session

    QVERIFY(app.wait_model());
    QVERIFY(!std::filesystem::exists(stray));
    // The chat goes on in the restored session: a second turn sees the first one, its KV read
    // back from the SSD blocks written after the first turn, not recomputed.
    QVERIFY(app.wait_model());
    QSignalSpy finished(app.controller->worker(), &ChatWorker::answerFinished);
    app.type_and_send(QStringLiteral("Thank you."));
    QVERIFY(app.wait_turn());
    QCOMPARE(app.window->messageView()->messageCount(), 4);
    QVERIFY2(app.window->composer()->errorText().isEmpty(),
             qPrintable(app.window->composer()->errorText()));
    QCOMPARE(finished.count(), 1);
    const TurnStats resumed = finished.at(0).at(1).value<TurnStats>();
    const QString status = app.window->statusText();
    qInfo(
        "resumed turn: prompt %lld, restored %lld from SSD in %.1f ms, replayed %lld, "
        "computed %lld; status: %s",
        qlonglong(resumed.prompt_tokens), qlonglong(resumed.restored_tokens), resumed.restore_ms,
        qlonglong(resumed.replayed_tokens), qlonglong(resumed.computed_tokens), qPrintable(status));
    // Every full block of the first turn's prompt comes back (the answer may add more).
    QVERIFY(resumed.restored_tokens >= first.prompt_tokens / kBlock * kBlock);
    QCOMPARE(resumed.restored_tokens % kBlock, 0);
    QCOMPARE(resumed.reused_tokens, 0);  // nothing was live in the new process
    // Only the tail past the last full block and the new question are run, plus the window
    // replay (at most the 128-token sliding window, counted apart from computed tokens).
    QCOMPARE(resumed.computed_tokens, resumed.prompt_tokens - resumed.restored_tokens);
    QVERIFY2(resumed.computed_tokens < kBlock + 32,
             qPrintable(QString::number(resumed.computed_tokens)));
    QVERIFY(resumed.replayed_tokens > 0 && resumed.replayed_tokens <= 128);
    QVERIFY(resumed.restore_ms > 0.0);
    QVERIFY2(status.contains(
                 QStringLiteral("restored %1 tokens from SSD in ").arg(resumed.restored_tokens)),
             qPrintable(status));
  }

  // Stop keeps the partial answer; closing the app mid-answer keeps it too (stored as
  // interrupted). After a restart each says what happened as the live view did ("stopped",
  // "interrupted") and the stopped one how long it thought. The slow backend makes turns long.
  void stopAndCloseMidAnswerKeepWhatWasGenerated() {
    QTemporaryDir data;
    EngineOptions slow;
    slow.backend = "cpu-reference";
    slow.threads = 1;
    {
      App app(data.path(), kModel, slow);
      QVERIFY(app.wait_model());
      QSignalSpy chunks(app.controller->worker(), &ChatWorker::answerText);
      app.type_and_send(QStringLiteral("Tell me a long story about the sea."));
      QVERIFY(QTest::qWaitFor([&] { return chunks.count() >= 3; }, kTurnMs));
      QTest::keyClick(app.window.get(), Qt::Key_Escape);
      QVERIFY(app.wait_turn());
      QCOMPARE(app.last_message()->note(), QStringLiteral("<i>stopped</i>"));
      QVERIFY(app.window->statusText().contains("tokens/s"));

      chunks.clear();
      app.type_and_send(QStringLiteral("Hello, who are you?"));
      QVERIFY(QTest::qWaitFor([&] { return chunks.count() >= 3; }, kTurnMs));
      QVERIFY(app.window->generating());
    }  // closed mid-answer
    App app(data.path(), kModel, slow);
    QVERIFY(
        QTest::qWaitFor([&] { return app.window->messageView()->messageCount() == 4; }, 10'000));
    for (int i : {1, 3}) {
      MessageBubble* answer = app.window->messageView()->message(i);
      QVERIFY(!answer->fromUser());
      QVERIFY(!(answer->text() + answer->thinking()).isEmpty());
      QCOMPARE(answer->note(),
               i == 1 ? QStringLiteral("<i>stopped</i>") : QStringLiteral("<i>interrupted</i>"));
    }
    MessageBubble* stopped = app.window->messageView()->message(1);
    QVERIFY(!stopped->thinking().isEmpty());  // stopped while thinking at effort 75
    QVERIFY2(stopped->thinkingTitle().startsWith(QStringLiteral("Thought for")),
             qPrintable(stopped->thinkingTitle()));
  }

  // A new chat is empty in every way: no figures of the chat shown before, nothing to regenerate.
  void aNewChatShowsNoOldStatsAndCannotRegenerate() {
    QTemporaryDir data;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    auto* regenerate = app.window->findChild<QPushButton*>(QStringLiteral("regenerate"));
    QVERIFY(!regenerate->isEnabled());  // the first window: no answer yet
    app.type_and_send(QStringLiteral("Hi! My name is Quinn."));
    QVERIFY(app.wait_turn());
    QVERIFY(app.window->statusText().contains(QStringLiteral("tokens/s")));
    QVERIFY(regenerate->isEnabled());
    const qint64 first = app.window->currentSession();
    app.window->newSession();
    QVERIFY(QTest::qWaitFor([&] { return app.window->currentSession() != 0; }, 10'000));
    QCOMPARE(app.window->statusText(), QString());
    QVERIFY(!regenerate->isEnabled());
    QCOMPARE(app.window->messageView()->messageCount(), 0);
    app.window->openSession(first);  // back to a chat with an answer
    QVERIFY(
        QTest::qWaitFor([&] { return app.window->messageView()->messageCount() == 2; }, 10'000));
    QVERIFY(regenerate->isEnabled());
  }

  // Regenerate replaces the last answer (in the view and on disk) instead of adding one.
  void regenerateReplacesTheLastAnswer() {
    QTemporaryDir data;
    {
      App app(data.path(), kModel);
      QVERIFY(app.wait_model());
      app.type_and_send(QStringLiteral("What is 4821 + 1367?"));
      QVERIFY(app.wait_turn());
      QCOMPARE(app.window->messageView()->messageCount(), 2);
      QSignalSpy finished(app.controller->worker(), &ChatWorker::answerFinished);
      QTest::mouseClick(app.window->findChild<QPushButton*>(QStringLiteral("regenerate")),
                        Qt::LeftButton);
      QVERIFY(app.window->generating());
      QVERIFY(app.wait_turn());
      QCOMPARE(finished.count(), 1);
      QCOMPARE(app.window->messageView()->messageCount(), 2);
      QCOMPARE(app.window->messageView()->message(0)->text(),
               QStringLiteral("What is 4821 + 1367?"));
      QVERIFY(!app.last_message()->text().isEmpty());
    }
    App app(data.path(), kModel);
    QVERIFY(
        QTest::qWaitFor([&] { return app.window->messageView()->messageCount() == 2; }, 10'000));
    QTest::qWait(200);  // nothing more arrives
    QCOMPARE(app.window->messageView()->messageCount(), 2);
  }

  // A prompt beyond the context is refused by the engine before its first token: the error is
  // shown, the text goes back to the composer, and nothing of the turn stays on disk.
  void aTurnTheEngineRefusesLeavesNoTrace() {
    QTemporaryDir data;
    EngineOptions tiny_context;
    tiny_context.max_context = 8;
    {
      App app(data.path(), kModel, tiny_context);
      QVERIFY(app.wait_model());
      app.type_and_send(QStringLiteral("Hello, who are you?"));
      QVERIFY(app.wait_turn());
      const QString error = app.window->composer()->errorText();
      QVERIFY2(error.contains("context"), qPrintable(error));
      QCOMPARE(app.window->composer()->edit()->toPlainText(),
               QStringLiteral("Hello, who are you?"));
      QVERIFY(
          QTest::qWaitFor([&] { return app.window->messageView()->messageCount() == 0; }, 5000));
    }
    App app(data.path(), kModel, tiny_context);
    QVERIFY(QTest::qWaitFor([&] { return app.window->sidebar()->model()->rowCount() == 1; }, 5000));
    QTest::qWait(300);
    QCOMPARE(app.window->messageView()->messageCount(), 0);
  }

  // The chat settings dialog's system prompt reaches the rendered prompt, and the settings are
  // the session's: they come back after a restart.
  void chatSettingsAreStoredPerSessionAndSent() {
    QTemporaryDir data;
    const QString system = QStringLiteral("You are a ship's navigator. Answer in one line.");
    {
      App app(data.path(), kModel);
      QVERIFY(app.wait_model());
      app.type_and_send(QStringLiteral("Hello, who are you?"));
      QVERIFY(app.wait_turn());
      QVERIFY(!app.window->promptPreview().contains(system));
      QTest::mouseClick(app.window->findChild<QPushButton*>(QStringLiteral("chatSettings")),
                        Qt::LeftButton);
      auto* dialog = app.window->findChild<SessionSettingsDialog*>();
      QVERIFY(dialog);
      dialog->systemPrompt()->setPlainText(system);
      dialog->temperature()->setValue(0.5);
      dialog->maxNewTokens()->setValue(64);
      dialog->accept();
      QVERIFY(
          QTest::qWaitFor([&] { return app.window->promptPreview().contains(system); }, 10'000));
    }
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    QVERIFY2(QTest::qWaitFor([&] { return app.window->promptPreview().contains(system); }, 10'000),
             qPrintable(app.window->promptPreview()));
    const SessionChoices choices = app.window->currentChoices();
    QCOMPARE(choices.system_prompt, system);
    QCOMPARE(choices.temperature, 0.5);  // exact in float
    QCOMPARE(choices.max_new_tokens, 64);
  }

  void brokenModelFolderShowsAnError() {
    QTemporaryDir data, models;
    QDir root(models.path());
    QVERIFY(root.mkpath("bad-config") && root.mkpath("no-tokenizer"));
    write_bytes(root.filePath("bad-config"), "config.json", "{ \"architectures\": [");
    for (const QString& name : QDir(kModel).entryList(QDir::Files)) {
      if (name.startsWith("tokenizer")) continue;
      QVERIFY(QFile::link(kModel + "/" + name, root.filePath("no-tokenizer/" + name)));
    }
    App app(data.path(), QString());
    const struct {
      QString dir;
      QString says;
    } cases[] = {
        {root.filePath("missing"), "no such folder"},
        {root.filePath("bad-config"), "config.json"},
        {root.filePath("no-tokenizer"), "tokenizer.json"},
    };
    for (const auto& c : cases) {
      app.window->loadModel(c.dir);
      QVERIFY2(QTest::qWaitFor([&] { return app.window->modelError().contains(c.says); }, kLoadMs),
               qPrintable(c.dir + ": " + app.window->modelError()));
      QVERIFY(app.window->modelError().contains(c.dir));
      QCOMPARE(app.window->modelName(), QStringLiteral("No model loaded"));
    }
    app.window->loadModel(kModel);  // a good folder afterwards clears the error
    QVERIFY(app.wait_model());
    QVERIFY(app.window->modelError().isEmpty());
  }

  void sessionsAreSearchedRenamedAndDeleted() {
    QTemporaryDir data;
    App app(data.path(), kModel);
    QVERIFY(app.wait_model());
    app.type_and_send(long_question());
    QVERIFY(app.wait_turn());
    // Its KV blocks are written in the background after the turn.
    QVERIFY(QTest::qWaitFor([&] { return kv_block_files(data.path()) > 0; }, 10'000));
    const QString answer = app.last_message()->text();
    const qint64 first = app.window->currentSession();
    app.window->newSession();
    QVERIFY(QTest::qWaitFor(
        [&] {
          const qint64 id = app.window->currentSession();
          return id != 0 && id != first;
        },
        5000));
    const qint64 second = app.window->currentSession();
    SessionListModel* list = app.window->sidebar()->model();
    QVERIFY(QTest::qWaitFor([&] { return list->rowCount() == 2; }, 5000));

    app.controller->renameSession(second, QStringLiteral("Zebra notes"));
    QVERIFY(QTest::qWaitFor(
        [&] { return list->index(list->rowOf(second)).data(Qt::EditRole) == "Zebra notes"; },
        5000));
    app.window->sidebar()->searchField()->setText(QStringLiteral("zEbRa"));
    QVERIFY(
        QTest::qWaitFor([&] { return list->rowCount() == 1 && list->idAt(0) == second; }, 5000));
    app.controller->renameSession(second, QStringLiteral("Zebra notes 斑马笔记"));
    app.window->sidebar()->searchField()->setText(QStringLiteral("斑马"));
    QVERIFY(QTest::qWaitFor(
        [&] {
          return list->rowCount() == 1 &&
                 list->index(0).data(Qt::EditRole) == "Zebra notes 斑马笔记";
        },
        5000));
    // By content: a word of the first session's answer that is not in its title.
    const QString word = answer.split(' ', Qt::SkipEmptyParts).last();
    app.window->sidebar()->searchField()->setText(word);
    QVERIFY2(QTest::qWaitFor([&] { return list->rowCount() == 1 && list->idAt(0) == first; }, 5000),
             qPrintable(word));

    app.window->sidebar()->searchField()->clear();
    app.controller->deleteSession(first);
    QVERIFY(
        QTest::qWaitFor([&] { return list->rowCount() == 1 && list->idAt(0) == second; }, 5000));
    app.window->sidebar()->searchField()->setText(word);
    QVERIFY(QTest::qWaitFor([&] { return list->rowCount() == 0; }, 5000));
    // Deleting really erases: the session's KV blocks are gone from the SSD too.
    QCOMPARE(kv_block_files(data.path()), 0);
  }
};

std::unique_ptr<QObject> make_app_test() {
  return std::make_unique<AppTest>();
}

}  // namespace flashdesk::ui::test

#include "app_test.moc"
