// Rendering and streaming of one message.
#include "ui/message_bubble.h"

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/image_files.h"
#include "ui/safe_markdown.h"

namespace flashdesk::ui {

namespace {

constexpr int kRenderIntervalMs = 50;
constexpr int kImageEdge = 160;

// Text from outside (answers, imported sessions) is shown by set_safe_markdown: no raw HTML, and
// links ask before they open.
QLabel* text_label(QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setWordWrap(true);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::LinksAccessibleByMouse);
  label->setOpenExternalLinks(false);
  label->setForegroundRole(QPalette::Text);  // on the bubble's Base / AlternateBase
  return label;
}

}  // namespace

QString code_blocks(const QString& markdown) {
  static const QRegularExpression fence(QStringLiteral("```[^\\n]*\\n(.*?)```"),
                                        QRegularExpression::DotMatchesEverythingOption);
  QStringList blocks;
  for (auto it = fence.globalMatch(markdown); it.hasNext();) blocks << it.next().captured(1);
  return blocks.join(QStringLiteral("\n"));
}

MessageBubble::MessageBubble(const MessageRow& message, QWidget* parent)
    : QFrame(parent),
      from_user_(message.from_user),
      text_(message.text),
      thinking_(message.thinking),
      body_(text_label(this)),
      thinking_toggle_(new QToolButton(this)),
      thinking_body_(text_label(this)),
      note_(new QLabel(this)),
      copy_code_(new QPushButton(tr("Copy code"), this)) {
  setObjectName(from_user_ ? QStringLiteral("userMessage") : QStringLiteral("answer"));
  setFrameShape(QFrame::StyledPanel);
  // Palette roles, not colours: the bubbles follow a theme switch without restyling.
  setAutoFillBackground(true);
  setBackgroundRole(from_user_ ? QPalette::AlternateBase : QPalette::Base);
  setForegroundRole(QPalette::Text);
  setAccessibleName(from_user_ ? tr("Your message") : tr("Answer"));
  auto* layout = new QVBoxLayout(this);
  auto* who = new QLabel(from_user_ ? tr("<b>You</b>") : tr("<b>FlashDesk</b>"), this);
  who->setForegroundRole(QPalette::Text);
  note_->setForegroundRole(QPalette::Text);
  layout->addWidget(who);
  thinking_toggle_->setCheckable(true);
  thinking_toggle_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  thinking_toggle_->setArrowType(Qt::RightArrow);
  thinking_toggle_->setAccessibleName(tr("Show or hide the thinking"));
  thinking_body_->setForegroundRole(QPalette::PlaceholderText);  // dimmer than the answer
  // Reasoning is worked line by line (one column of a sum per line): plain text keeps its line
  // breaks, which markdown would join into one paragraph.
  thinking_body_->setTextFormat(Qt::PlainText);
  thinking_body_->setObjectName(QStringLiteral("thinking"));
  connect(thinking_toggle_, &QToolButton::toggled, this, &MessageBubble::setThinkingExpanded);
  layout->addWidget(thinking_toggle_);
  layout->addWidget(thinking_body_);
  body_->setObjectName(QStringLiteral("body"));
  layout->addWidget(body_);
  addImages(message.image_paths);

  auto* footer = new QHBoxLayout;
  auto* copy = new QPushButton(tr("Copy"), this);
  copy->setAccessibleName(tr("Copy the message"));
  connect(copy, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(text_); });
  connect(copy_code_, &QPushButton::clicked, this,
          [this] { QApplication::clipboard()->setText(code_blocks(text_)); });
  footer->addWidget(note_);
  footer->addStretch();
  footer->addWidget(copy_code_);
  footer->addWidget(copy);
  layout->addLayout(footer);

  render_timer_.setSingleShot(true);
  render_timer_.setInterval(kRenderIntervalMs);
  connect(&render_timer_, &QTimer::timeout, this, &MessageBubble::render);
  setThinkingExpanded(false);
  thinking_seconds_ = message.thinking_seconds;  // stored with the answer (unknown: < 0)
  // As the live view said it: a stop is "stopped"; "interrupted" is an answer the app's end cut.
  if (message.stopped)
    note_->setText(QStringLiteral("<i>%1</i>").arg(tr("stopped")));
  else if (message.interrupted)
    note_->setText(QStringLiteral("<i>%1</i>").arg(tr("interrupted")));
  render();
}

void MessageBubble::addImages(const QStringList& paths) {
  if (paths.isEmpty()) return;
  image_paths_ = paths;
  auto* row = new QHBoxLayout;
  for (const QString& path : paths) {
    auto* image = new QLabel(this);
    image->setPixmap(QPixmap::fromImage(image_thumbnail(path, kImageEdge)));
    row->addWidget(image);
  }
  row->addStretch();
  static_cast<QVBoxLayout*>(layout())->addLayout(row);
}

QString MessageBubble::note() const {
  return note_->text();
}

QString MessageBubble::thinkingTitle() const {
  return thinking_toggle_->text();
}

bool MessageBubble::thinkingExpanded() const {
  return thinking_toggle_->isChecked();
}

void MessageBubble::setThinkingExpanded(bool expanded) {
  if (thinking_toggle_->isChecked() != expanded) thinking_toggle_->setChecked(expanded);
  thinking_toggle_->setArrowType(expanded ? Qt::DownArrow : Qt::RightArrow);
  thinking_body_->setVisible(expanded && !thinking_.isEmpty());
}

void MessageBubble::updateThinkingTitle() {
  if (streaming_ && thinking_seconds_ < 0) {
    thinking_toggle_->setText(tr("Thinking…"));
  } else if (thinking_seconds_ >= 0) {
    thinking_toggle_->setText(tr("Thought for %1 s").arg(thinking_seconds_, 0, 'f', 1));
  } else {
    thinking_toggle_->setText(tr("Thinking"));
  }
  thinking_toggle_->setVisible(!thinking_.isEmpty());
}

void MessageBubble::appendText(bool thinking, const QString& chunk) {
  if (!streaming_) {
    streaming_ = true;
    setThinkingExpanded(true);  // show the reasoning while it is written
  }
  if (thinking) {
    if (!thinking_clock_.isValid()) thinking_clock_.start();
    thinking_ += chunk;
  } else {
    if (thinking_clock_.isValid() && thinking_seconds_ < 0) {
      thinking_seconds_ = thinking_clock_.elapsed() / 1000.0;
      setThinkingExpanded(false);  // the answer has begun: fold the reasoning away
    }
    text_ += chunk;
  }
  if (!render_timer_.isActive()) render_timer_.start();
}

void MessageBubble::finish(const QString& note) {
  if (thinking_clock_.isValid() && thinking_seconds_ < 0)
    thinking_seconds_ = thinking_clock_.elapsed() / 1000.0;
  streaming_ = false;
  render_timer_.stop();
  note_->setText(note.isEmpty() ? QString() : QStringLiteral("<i>%1</i>").arg(note));
  render();
}

void MessageBubble::render() {
  set_safe_markdown(body_, text_);
  body_->setVisible(!text_.isEmpty() || from_user_);
  thinking_body_->setText(thinking_);
  thinking_body_->setVisible(thinkingExpanded() && !thinking_.isEmpty());
  copy_code_->setVisible(text_.contains(QStringLiteral("```")));
  updateThinkingTitle();
}

}  // namespace flashdesk::ui
