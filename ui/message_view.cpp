// The conversation column and its auto-scroll.
#include "ui/message_view.h"

#include <QLabel>
#include <QScrollBar>
#include <QVBoxLayout>

#include "ui/message_bubble.h"

namespace flashdesk::ui {

MessageView::MessageView(QWidget* parent)
    : QScrollArea(parent),
      column_(new QWidget),
      layout_(new QVBoxLayout(column_)),
      empty_(new QLabel(column_)) {
  setWidgetResizable(true);
  setAccessibleName(tr("Conversation"));
  empty_->setObjectName(QStringLiteral("emptyChat"));
  empty_->setWordWrap(true);
  empty_->setTextFormat(Qt::RichText);
  empty_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  empty_->setForegroundRole(QPalette::PlaceholderText);
  empty_->setMargin(24);
  layout_->addWidget(empty_);
  layout_->addStretch();
  setWidget(column_);
  // The column grows after a message is added (the layout runs later): the end is kept in view
  // when the range changes, not when the message is added.
  connect(verticalScrollBar(), &QScrollBar::rangeChanged, this, &MessageView::onRangeChanged);
  // The reader moving away from the end stops the following; coming back to it resumes.
  connect(verticalScrollBar(), &QScrollBar::sliderMoved, this,
          [this](int value) { following_ = value >= verticalScrollBar()->maximum() - 8; });
  connect(verticalScrollBar(), &QScrollBar::actionTriggered, this, [this] {
    following_ = verticalScrollBar()->sliderPosition() >= verticalScrollBar()->maximum() - 8;
  });
  showEmptyText();
}

QString MessageView::emptyText() const {
  return empty_->text();
}

bool MessageView::emptyTextVisible() const {
  return !empty_->isHidden();
}

void MessageView::setEmptyText(const QString& text) {
  empty_->setText(text);
  showEmptyText();
}

void MessageView::showEmptyText() {
  empty_->setVisible(bubbles_.isEmpty() && !empty_->text().isEmpty());
}

void MessageView::clearMessages() {
  for (MessageBubble* bubble : bubbles_) delete bubble;
  bubbles_.clear();
  streaming_ = nullptr;
  showEmptyText();
  followEnd();  // a chat opened (or refilled by a regenerate) shows its end
}

void MessageView::addMessage(const MessageRow& message) {
  auto* bubble = new MessageBubble(message, column_);
  layout_->insertWidget(layout_->count() - 1, bubble);
  bubbles_ << bubble;
  showEmptyText();
  if (message.from_user) followEnd();  // the user's own message always comes into view
  if (following_) followEnd();
}

void MessageView::beginAnswer() {
  MessageRow answer;
  answer.from_user = false;
  addMessage(answer);
  streaming_ = bubbles_.back();
}

void MessageView::appendAnswerText(bool thinking, const QString& text) {
  if (!streaming_) beginAnswer();
  streaming_->appendText(thinking, text);  // the range grows later; onRangeChanged follows it
}

void MessageView::finishAnswer(const QString& note) {
  if (!streaming_) return;
  streaming_->finish(note);
  streaming_ = nullptr;
}

void MessageView::followEnd() {
  following_ = true;
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

void MessageView::onRangeChanged(int /*min*/, int max) {
  if (following_) verticalScrollBar()->setValue(max);
}

}  // namespace flashdesk::ui
