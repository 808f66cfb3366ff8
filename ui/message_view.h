// The conversation: a scrolling column of message bubbles. It follows the end (a new message, a
// streaming answer, a chat opened or refilled) unless the reader scrolled up to read, and a
// message the user sends always brings the end back into view. An empty chat shows a text saying
// what to do (the window sets it: what the loaded model can do).
#pragma once

#include <QScrollArea>

#include "ui/chat_types.h"

class QLabel;
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
  QString emptyText() const;
  bool emptyTextVisible() const;
  void setEmptyText(const QString& text);  // rich text, shown while there are no messages

 public slots:
  void clearMessages();
  void addMessage(const flashdesk::ui::MessageRow& message);
  void beginAnswer();
  void appendAnswerText(bool thinking, const QString& text);
  void finishAnswer(const QString& note);

 private:
  void followEnd();  // from now on keep the end in view, whatever the layout does next
  void onRangeChanged(int min, int max);
  void showEmptyText();

  QWidget* column_;
  QVBoxLayout* layout_;
  QLabel* empty_;
  QList<MessageBubble*> bubbles_;
  MessageBubble* streaming_ = nullptr;
  bool following_ = true;  // the view sits at the end and stays there as the column grows
};

}  // namespace flashdesk::ui
