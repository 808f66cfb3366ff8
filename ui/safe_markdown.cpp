// Markdown without raw HTML and links that ask before they open.
#include "ui/safe_markdown.h"

#include <QDesktopServices>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextFragment>
#include <QUrl>

namespace flashdesk::ui {
namespace {

// Replaces every image of `doc` by "[image: address]" in plain text.
void images_to_words(QTextDocument& doc) {
  struct Image {
    int position, length;
    QString name;
  };
  QList<Image> images;
  for (QTextBlock block = doc.begin(); block.isValid(); block = block.next())
    for (auto it = block.begin(); !it.atEnd(); ++it) {
      const QTextFragment f = it.fragment();
      if (f.isValid() && f.charFormat().isImageFormat())
        images.push_back({f.position(), f.length(), f.charFormat().toImageFormat().name()});
    }
  for (auto it = images.rbegin(); it != images.rend(); ++it) {  // from the end: positions hold
    QTextCursor cursor(&doc);
    cursor.setPosition(it->position);
    cursor.setPosition(it->position + it->length, QTextCursor::KeepAnchor);
    cursor.insertText(QObject::tr("[image: %1]").arg(it->name), QTextCharFormat());
  }
}

}  // namespace

QString safe_markdown_html(const QString& markdown) {
  QTextDocument doc;
  doc.setMarkdown(markdown, QTextDocument::MarkdownFeatures(QTextDocument::MarkdownDialectGitHub |
                                                            QTextDocument::MarkdownNoHTML));
  images_to_words(doc);
  return doc.toHtml();
}

void set_safe_markdown(QLabel* label, const QString& markdown) {
  if (label->textFormat() != Qt::RichText) {
    label->setTextFormat(Qt::RichText);
    label->setOpenExternalLinks(false);
    QObject::connect(label, &QLabel::linkActivated, label,
                     [label](const QString& url) { ask_to_open_link(label->window(), url); });
  }
  label->setText(safe_markdown_html(markdown));
}

bool is_openable_link(const QString& url) {
  const QString scheme = QUrl(url).scheme().toLower();
  return scheme == QLatin1String("http") || scheme == QLatin1String("https") ||
         scheme == QLatin1String("mailto");
}

bool ask_to_open_link(QWidget* parent, const QString& url) {
  QMessageBox box(parent);
  box.setTextFormat(Qt::PlainText);  // the address as typed, never as markup
  box.setWindowTitle(QObject::tr("Open link"));
  if (!is_openable_link(url)) {
    box.setIcon(QMessageBox::Warning);
    box.setText(QObject::tr("FlashDesk opens only web and mail links. This one was not opened:"));
    box.setInformativeText(url);
    box.setStandardButtons(QMessageBox::Ok);
    box.exec();
    return false;
  }
  box.setIcon(QMessageBox::Question);
  box.setText(QObject::tr("Open this address in your browser?"));
  box.setInformativeText(url);
  box.setStandardButtons(QMessageBox::Open | QMessageBox::Cancel);
  box.setDefaultButton(QMessageBox::Cancel);
  if (box.exec() != QMessageBox::Open) return false;
  return QDesktopServices::openUrl(QUrl(url));
}

}  // namespace flashdesk::ui
