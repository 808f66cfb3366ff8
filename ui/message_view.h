// The conversation: a scrolling column of message bubbles that follows a streaming answer.
#pragma once

#include <QScrollArea>

#include "ui/chat_types.h"

class QVBoxLayout;

namespace flashdesk::ui {

class MessageBubble;

class MessageView : public QScrollArea {
  Q_OBJECT

 public:
  explicit MessageView(QWidget* parent = nullptr);

  int messageCount() const { return int(bubbles_.size()); }
  MessageBubble* message(int index) const { return bubbles_.value(index); }
  MessageBubble* streamingAnswer() const { return streaming_; }

 public slots:
  void clearMessages();
  void addMessage(const flashdesk::ui::MessageRow& message);
  void beginAnswer();
  void appendAnswerText(bool thinking, const QString& text);
  void finishAnswer(const QString& note);

 private:
  void scrollToEnd();

  QWidget* column_;
  QVBoxLayout* layout_;
  QList<MessageBubble*> bubbles_;
  MessageBubble* streaming_ = nullptr;
};

}  // namespace flashdesk::ui
