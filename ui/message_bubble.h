// One message of the conversation: markdown text, for answers a collapsible thinking block with
// its duration, copy buttons, and while streaming a throttled re-render (markdown is re-laid out
// at most every 50 ms, so a fast stream never floods the GUI thread).
#pragma once

#include <QElapsedTimer>
#include <QFrame>
#include <QTimer>

#include "ui/chat_types.h"

class QLabel;
class QToolButton;
class QPushButton;

namespace flashdesk::ui {

class MessageBubble : public QFrame {
  Q_OBJECT

 public:
  MessageBubble(const MessageRow& message, QWidget* parent = nullptr);

  bool fromUser() const { return from_user_; }
  const QString& text() const { return text_; }
  const QString& thinking() const { return thinking_; }
  const QStringList& imagePaths() const { return image_paths_; }  // the files shown, in order
  QString thinkingTitle() const;
  QString note() const;  // "stopped", "interrupted"... in words; empty for a complete answer
  bool thinkingExpanded() const;
  void setThinkingExpanded(bool expanded);

  void appendText(bool thinking, const QString& chunk);  // streaming
  void finish(const QString& note);                      // e.g. "stopped"; empty when complete

 private:
  void render();
  void addImages(const QStringList& paths);
  void updateThinkingTitle();

  bool from_user_;
  QString text_;
  QString thinking_;
  QStringList image_paths_;
  QLabel* body_;
  QToolButton* thinking_toggle_;
  QLabel* thinking_body_;
  QLabel* note_;
  QPushButton* copy_code_;
  QTimer render_timer_;
  QElapsedTimer thinking_clock_;
  double thinking_seconds_ = -1.0;  // how long the reasoning took; < 0: unknown
  bool streaming_ = false;
};

// The fenced code blocks of a markdown text, joined by blank lines (for "Copy code").
QString code_blocks(const QString& markdown);

}  // namespace flashdesk::ui
