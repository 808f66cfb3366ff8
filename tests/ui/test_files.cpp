// Files the UI tests drop and attach: real PNGs and deliberately broken ones.
#include <QFile>
#include <QImage>

#include "tests/ui/ui_test_classes.h"

namespace flashdesk::ui::test {

QString write_png(const QString& dir, const QString& name, int w, int h) {
  QImage image(w, h, QImage::Format_RGB32);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) image.setPixel(x, y, qRgb(x * 255 / w, y * 255 / h, 128));
  const QString path = dir + QLatin1Char('/') + name;
  if (!image.save(path, "PNG")) qFatal("cannot write %s", qPrintable(path));
  return path;
}

QString write_bytes(const QString& dir, const QString& name, const QByteArray& bytes) {
  const QString path = dir + QLatin1Char('/') + name;
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size())
    qFatal("cannot write %s", qPrintable(path));
  return path;
}

}  // namespace flashdesk::ui::test
