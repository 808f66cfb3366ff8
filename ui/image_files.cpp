// Image checks with QImageReader: decoding the whole file is the only proof it is not damaged.
#include "ui/image_files.h"

#include <QFileInfo>
#include <QImageReader>

namespace flashdesk::ui {

namespace {

bool supported_format(const QByteArray& format) {
  static const QList<QByteArray> kFormats = {"png", "jpeg", "jpg", "webp", "gif", "bmp"};
  return kFormats.contains(format.toLower());
}

}  // namespace

std::optional<QString> image_problem(const QString& path) {
  const QFileInfo info(path);
  const QString name = info.fileName();
  if (!info.exists() || !info.isFile()) return name + QStringLiteral(": no such file");
  if (info.size() == 0) return name + QStringLiteral(": the file is empty");
  if (info.size() > kMaxImageBytes)
    return name + QStringLiteral(": larger than %1 MiB").arg(kMaxImageBytes >> 20);
  QImageReader reader(path);
  reader.setDecideFormatFromContent(true);
  const QByteArray format = reader.format();
  if (format.isEmpty() || !supported_format(format))
    return name + QStringLiteral(": not a supported image (PNG, JPEG, WebP, GIF or BMP)");
  if (reader.read().isNull())
    return name + QStringLiteral(": the image is damaged (%1)").arg(reader.errorString());
  return std::nullopt;
}

QImage image_thumbnail(const QString& path, int edge) {
  QImageReader reader(path);
  reader.setDecideFormatFromContent(true);
  reader.setAutoTransform(true);
  const QImage image = reader.read();
  if (image.isNull()) return {};
  return image.scaled(edge, edge, Qt::KeepAspectRatio, Qt::SmoothTransformation);
}

}  // namespace flashdesk::ui
