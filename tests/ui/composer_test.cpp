// Composer: images dropped, pasted and removed; broken files refused in words; Enter vs
// Shift+Enter.
#include <QApplication>
#include <QClipboard>
#include <QDropEvent>
#include <QFile>
#include <QLabel>
#include <QMimeData>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QToolButton>

#include "tests/ui/ui_test_classes.h"
#include "ui/composer.h"

namespace flashdesk::ui::test {

class ComposerTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;

  // Delivers a drag of `data` entering the composer and dropped at its centre, as a window
  // system would.
  static void drop(Composer& composer, QMimeData& data) {
    const QPointF centre(composer.width() / 2.0, composer.height() / 2.0);
    QDragEnterEvent enter(centre.toPoint(), Qt::CopyAction, &data, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&composer, &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(centre, Qt::CopyAction, &data, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&composer, &drop);
  }

  static void drop_urls(Composer& composer, const QList<QUrl>& urls) {
    QMimeData data;
    data.setUrls(urls);
    drop(composer, data);
  }

  static QList<QLabel*> thumbnails(const Composer& composer) {
    return composer.findChildren<QLabel*>(QStringLiteral("thumbnail"));
  }

 private slots:
  void droppedImageUrlShowsThumbnailThatCanBeRemoved() {
    Composer composer;
    composer.resize(500, 200);
    composer.show();
    const QString png = write_png(dir_.path(), QStringLiteral("photo.png"), 300, 150);
    drop_urls(composer, {QUrl::fromLocalFile(png)});
    QCOMPARE(composer.attachments(), QStringList{png});
    QCOMPARE(thumbnails(composer).size(), 1);
    const QPixmap thumb = thumbnails(composer).front()->pixmap();
    QCOMPARE(thumb.size(), QSize(64, 32));  // 300 × 150 fitted into 64 × 64
    QVERIFY(composer.errorText().isEmpty());

    auto* remove = composer.findChild<QToolButton*>(QStringLiteral("removeAttachment"));
    QVERIFY(remove);
    QTest::mouseClick(remove, Qt::LeftButton);
    QVERIFY(composer.attachments().isEmpty());
    QCOMPARE(thumbnails(composer).size(), 0);
  }

  // The composer takes what the engine reads, Qt's image plugins or not: Debian's qt6-base reads
  // no WebP or TGA. The thumbnail is the engine's decode (tiny.webp: 4 x 3, red top-left).
  void webpAndTgaAreAttachedWithThumbnails() {
    Composer composer;
    composer.show();
    const QString data = QStringLiteral(FD_SOURCE_DIR "/tests/data/vision/");
    for (const QString& name : {QStringLiteral("tiny.webp"), QStringLiteral("tiny.tga")}) {
      QFile::remove(dir_.filePath(name));
      QVERIFY(QFile::copy(data + name, dir_.filePath(name)));
      drop_urls(composer, {QUrl::fromLocalFile(dir_.filePath(name))});
      QVERIFY2(composer.errorText().isEmpty(), qPrintable(composer.errorText()));
    }
    QCOMPARE(composer.attachments().size(), 2);
    QCOMPARE(thumbnails(composer).size(), 2);
    const QImage thumb = thumbnails(composer).front()->pixmap().toImage();
    QCOMPARE(thumb.size(), QSize(64, 48));
    const QColor corner = thumb.pixelColor(0, 0);  // smooth scaling: close to red, not exact
    QVERIFY2(corner.red() > 200 && corner.green() < 60 && corner.blue() < 60,
             qPrintable(corner.name()));
  }

  void brokenAndUnsupportedFilesAreRefusedWithAMessage() {
    Composer composer;
    composer.show();
    QFile real(write_png(dir_.path(), QStringLiteral("whole.png"), 40, 40));
    QVERIFY(real.open(QIODevice::ReadOnly));
    const QByteArray png = real.readAll();
    QFile webp_file(QStringLiteral(FD_SOURCE_DIR "/tests/data/vision/shapes-500x300.webp"));
    QVERIFY(webp_file.open(QIODevice::ReadOnly));
    const QByteArray webp = webp_file.readAll();
    const struct {
      QString file;
      QString says;
    } cases[] = {
        {write_bytes(dir_.path(), "truncated.png", png.left(png.size() / 2)), "damaged"},
        {write_bytes(dir_.path(), "notes.png", "just some text, not pixels"), "not a supported"},
        {write_bytes(dir_.path(), "cut.webp", webp.left(webp.size() / 2)), "damaged"},
        {write_bytes(dir_.path(), "empty.jpg", {}), "empty"},
        {dir_.path() + "/missing.png", "no such file"},
    };
    for (const auto& c : cases) {
      drop_urls(composer, {QUrl::fromLocalFile(c.file)});
      QVERIFY2(composer.attachments().isEmpty(), qPrintable(c.file));
      QVERIFY2(composer.errorText().contains(QFileInfo(c.file).fileName()),
               qPrintable(composer.errorText()));
      QVERIFY2(composer.errorText().contains(c.says), qPrintable(composer.errorText()));
    }
    drop_urls(composer, {QUrl(QStringLiteral("https://example.com/cat.png"))});
    QVERIFY(composer.errorText().contains("only local files"));
    QVERIFY(composer.attachments().isEmpty());
  }

  // A browser's drag of a picture: its web address and its pixels; the pixels are attached.
  void webImageDragWithPixelsAttachesThePixels() {
    Composer composer;
    composer.resize(500, 200);
    composer.show();
    QImage image(40, 30, QImage::Format_RGB32);
    image.fill(Qt::blue);
    QMimeData data;
    data.setUrls({QUrl(QStringLiteral("https://example.com/cat.png"))});
    data.setImageData(image);
    drop(composer, data);
    QVERIFY2(composer.errorText().isEmpty(), qPrintable(composer.errorText()));
    QCOMPARE(composer.attachments().size(), 1);
    QCOMPARE(QImage(composer.attachments().front()).size(), QSize(40, 30));
  }

  void pastedImageBecomesAnAttachment() {
    Composer composer;
    composer.show();
    QImage image(30, 20, QImage::Format_RGB32);
    image.fill(Qt::red);
    QApplication::clipboard()->setImage(image);
    composer.edit()->setFocus();
    composer.edit()->paste();
    QCOMPARE(composer.attachments().size(), 1);
    QCOMPARE(QImage(composer.attachments().front()).size(), QSize(30, 20));
    QCOMPARE(thumbnails(composer).size(), 1);
  }

  void enterSendsAndShiftEnterBreaksTheLine() {
    Composer composer;
    composer.show();
    QSignalSpy submitted(&composer, &Composer::submitted);
    QTest::keyClicks(composer.edit(), QStringLiteral("first line"));
    QTest::keyClick(composer.edit(), Qt::Key_Return, Qt::ShiftModifier);
    QTest::keyClicks(composer.edit(), QStringLiteral("second"));
    QCOMPARE(submitted.count(), 0);
    QCOMPARE(composer.edit()->toPlainText(), QStringLiteral("first line\nsecond"));
    QTest::keyClick(composer.edit(), Qt::Key_Return);
    QCOMPARE(submitted.count(), 1);
    QCOMPARE(submitted.front().at(0).toString(), QStringLiteral("first line\nsecond"));

    composer.setGenerating(true);  // no second message while an answer is being written
    QTest::keyClick(composer.edit(), Qt::Key_Return);
    QCOMPARE(submitted.count(), 1);
  }
};

std::unique_ptr<QObject> make_composer_test() {
  return std::make_unique<ComposerTest>();
}

}  // namespace flashdesk::ui::test

#include "composer_test.moc"
