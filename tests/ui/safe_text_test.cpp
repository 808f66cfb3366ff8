// Text from outside shown safely, on real widgets: raw HTML in an answer (or an imported session)
// shows as typed, Markdown images become words, and a link opens only after the user has seen its
// full address and agreed (web and mail links only). The desktop is replaced by a URL handler
// that records what would have been opened.
#include <QApplication>
#include <QDesktopServices>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QTest>
#include <QTextDocument>
#include <QTimer>
#include <QUrl>

#include "tests/ui/ui_test_classes.h"
#include "ui/message_bubble.h"
#include "ui/safe_markdown.h"

namespace flashdesk::ui::test {

// Stands in for the desktop's browser: records every URL QDesktopServices::openUrl hands over.
class UrlRecorder : public QObject {
  Q_OBJECT

 public:
  QList<QUrl> opened;

 public slots:
  void open(const QUrl& url) { opened.push_back(url); }
};

class SafeTextTest : public QObject {
  Q_OBJECT

 private:
  UrlRecorder recorder_;

  static QLabel* body(MessageBubble& bubble) {
    return bubble.findChild<QLabel*>(QStringLiteral("body"));
  }

  // What the label shows, as plain text.
  static QString shown(const QLabel* label) {
    QTextDocument doc;
    doc.setHtml(label->text());
    return doc.toPlainText();
  }

  static MessageBubble* answer(const QString& text) {
    MessageRow row;
    row.from_user = false;
    row.text = text;
    auto* bubble = new MessageBubble(row);
    bubble->resize(600, 300);
    bubble->show();
    return bubble;
  }

  // Presses `button` on the next message box that opens; its informative text lands in `*seen`.
  static void answer_next_box(QMessageBox::StandardButton button, QString* seen) {
    QTimer::singleShot(0, [button, seen] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      QVERIFY(box != nullptr);
      *seen = box->informativeText();
      QCOMPARE(box->textFormat(), Qt::PlainText);
      box->button(button)->click();
    });
  }

 private slots:
  void initTestCase() {
    for (const char* scheme : {"http", "https", "mailto", "file", "x-run"})
      QDesktopServices::setUrlHandler(QString::fromLatin1(scheme), &recorder_, "open");
  }
  void cleanupTestCase() {
    for (const char* scheme : {"http", "https", "mailto", "file", "x-run"})
      QDesktopServices::unsetUrlHandler(QString::fromLatin1(scheme));
  }
  void init() { recorder_.opened.clear(); }

  void rawHtmlInAnAnswerIsShownAsTyped() {
    std::unique_ptr<MessageBubble> bubble(
        answer(QStringLiteral("Hi <b>there</b> <img src=\"/etc/hosts\"> "
                              "<a href=\"file:///usr/bin/xterm\">x</a> and **bold**")));
    const QLabel* label = body(*bubble);
    QVERIFY(label != nullptr);
    const QString text = shown(label);
    QVERIFY2(text.contains(QStringLiteral("<b>there</b>")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("<img src=\"/etc/hosts\">")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("<a href=\"file:///usr/bin/xterm\">x</a>")),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("and bold")), qPrintable(text));  // Markdown still works
    QVERIFY(!label->text().contains(QStringLiteral("href=\"file:")));
    QVERIFY(!label->text().contains(QStringLiteral("<img")));
    QVERIFY(!label->openExternalLinks());
  }

  void markdownImagesBecomeWords() {
    std::unique_ptr<MessageBubble> bubble(answer(QStringLiteral("See ![a cat](/etc/hosts) here")));
    const QLabel* label = body(*bubble);
    QVERIFY2(shown(label).contains(QStringLiteral("[image: /etc/hosts]")),
             qPrintable(shown(label)));
    QVERIFY(!label->text().contains(QStringLiteral("<img")));
  }

  void aLinkOpensOnlyWhenTheUserAgrees() {
    const QString url = QStringLiteral("https://example.com/a?b=1");
    std::unique_ptr<MessageBubble> bubble(answer(QStringLiteral("Go to [the site](%1).").arg(url)));
    QLabel* label = body(*bubble);
    QVERIFY(label->text().contains(QStringLiteral("href=\"https://example.com/a?b=1\"")));
    QString seen;
    answer_next_box(QMessageBox::Cancel, &seen);
    emit label->linkActivated(url);  // what a click on the link does
    QCOMPARE(seen, url);             // the whole address was shown
    QVERIFY(recorder_.opened.isEmpty());
    answer_next_box(QMessageBox::Open, &seen);
    emit label->linkActivated(url);
    QCOMPARE(recorder_.opened, QList<QUrl>{QUrl(url)});
  }

  void linksOtherThanWebAndMailAreRefused() {
    QVERIFY(is_openable_link(QStringLiteral("mailto:someone@example.com")));
    QVERIFY(is_openable_link(QStringLiteral("HTTP://example.com")));
    for (const QString& url : {QStringLiteral("file:///usr/bin/xterm"),
                               QStringLiteral("x-run:rm -rf"), QStringLiteral("relative/path")}) {
      QVERIFY(!is_openable_link(url));
      std::unique_ptr<MessageBubble> bubble(answer(QStringLiteral("[run](%1)").arg(url)));
      QString seen;
      answer_next_box(QMessageBox::Ok, &seen);
      emit body(*bubble)->linkActivated(url);
      QCOMPARE(seen, url);
    }
    QVERIFY(recorder_.opened.isEmpty());
  }
};

std::unique_ptr<QObject> make_safe_text_test() {
  return std::make_unique<SafeTextTest>();
}

}  // namespace flashdesk::ui::test

#include "safe_text_test.moc"
