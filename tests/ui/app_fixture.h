// The app objects main() makes, on one data folder and the real demo model, for the QTests that
// run whole turns (AppTest, ImageChatTest).
#pragma once

#include <QString>
#include <QTest>
#include <memory>

#include "ui/chat_controller.h"
#include "ui/composer.h"
#include "ui/main_window.h"
#include "ui/message_bubble.h"
#include "ui/message_view.h"
#include "ui/persistent_chat_service.h"

namespace flashdesk::ui::test {

inline const QString kModel = QStringLiteral(FD_SOURCE_DIR "/assets/models/flash-tiny");
inline constexpr int kLoadMs = 60'000;
inline constexpr int kTurnMs = 120'000;

// The app objects main() makes, on one data folder.
struct App {
  std::unique_ptr<ChatController> controller;
  std::unique_ptr<MainWindow> window;
  // The worker's service (owned by the controller): read it only between turns.
  PersistentChatService* service = nullptr;

  App(const QString& data_dir, const QString& model_dir, EngineOptions engine = {}) {
    const auto layout = storage::StorageLayout::in(data_dir.toStdString());
    auto chat = std::make_unique<PersistentChatService>(
        storage::PersistentChatOptions{.layout = layout}, engine);
    service = chat.get();
    controller = std::make_unique<ChatController>(std::move(chat), layout);
    window = std::make_unique<MainWindow>(*controller, model_dir);
    window->show();
  }
  ~App() {
    window.reset();  // the window goes first: it refers to the controller
    controller.reset();
  }
  bool wait_model() const {
    return QTest::qWaitFor([&] { return window->modelName().startsWith("Model:"); }, kLoadMs);
  }
  void type_and_send(const QString& text) const {
    QTest::keyClicks(window->composer()->edit(), text);
    QTest::keyClick(window->composer()->edit(), Qt::Key_Return);
  }
  bool wait_turn() const {
    return QTest::qWaitFor([&] { return !window->generating(); }, kTurnMs);
  }
  // The ids the engine holds for the open chat after a turn, as text: what the model was given.
  // After a thinking turn that is the prompt up to its final <think>, which every later rendering
  // replaces (so the engine releases it and the answer after it).
  std::string prefilled_text() const {
    storage::PersistentChat* chat = service->chat();
    if (!chat || !chat->live_state()) return {};
    return chat->engine().tokenizer().decode(chat->live_state()->tokens);
  }
  MessageBubble* last_message() const {
    const MessageView* view = window->messageView();
    return view->messageCount() ? view->message(view->messageCount() - 1) : nullptr;
  }
};

// A first question whose prompt spans more than one KV block (256 tokens, the default) and more
// than the 128-token sliding window of the demo model.
inline QString long_question() {
  QString question = QStringLiteral("Hello, who are you? Please read my notes first.");
  for (int i = 1; i <= 40; ++i)
    question += QStringLiteral(" Note %1: the ship number %1 sailed north at dawn.").arg(i);
  return question;
}

}  // namespace flashdesk::ui::test
