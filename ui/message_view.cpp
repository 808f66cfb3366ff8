// The conversation column and its auto-scroll.
#include "ui/message_view.h"

#include <QScrollBar>
#include <QTimer>
#include <QVBoxLayout>

#include "ui/message_bubble.h"

namespace flashdesk::ui {

MessageView::MessageView(QWidget* parent)
    : QScrollArea(parent), column_(new QWidget), layout_(new QVBoxLayout(column_)) {
  setWidgetResizable(true);
  setAccessibleName(tr("Conversation"));
  layout_->addStretch();
  setWidget(column_);
}

void MessageView::clearMessages() {
  for (MessageBubble* bubble : bubbles_) delete bubble;
  bubbles_.clear();
  streaming_ = nullptr;
}

void MessageView::addMessage(const MessageRow& message) {
  auto* bubble = new MessageBubble(message, column_);
  layout_->insertWidget(layout_->count() - 1, bubble);
  bubbles_ << bubble;
  scrollToEnd();
}

void MessageView::beginAnswer() {
  MessageRow answer;
  answer.from_user = false;
  addMessage(answer);
  streaming_ = bubbles_.back();
}

void MessageView::appendAnswerText(bool thinking, const QString& text) {
  if (!streaming_) beginAnswer();
  const bool at_end = verticalScrollBar()->value() >= verticalScrollBar()->maximum() - 8;
  streaming_->appendText(thinking, text);
  if (at_end) scrollToEnd();  // follow the answer unless the user scrolled up to read
}

void MessageView::finishAnswer(const QString& note) {
  if (!streaming_) return;
  streaming_->finish(note);
  streaming_ = nullptr;
}

void MessageView::scrollToEnd() {
  QTimer::singleShot(0, this,
                     [this] { verticalScrollBar()->setValue(verticalScrollBar()->maximum()); });
}

}  // namespace flashdesk::ui
