// Image checks with the engine's own decoder: the composer accepts exactly the files the engine
// reads (decoding the whole file is the only proof it is not damaged), whatever image plugins
// this Qt has (Debian's qt6-base has no WebP or TGA reader).
#include "ui/image_files.h"

#include <QFile>
#include <QFileInfo>
#include <filesystem>

#include "engine/util/error.h"
#include "engine/vision/image_decode.h"
#include "engine/vision/webp_decode.h"

namespace flashdesk::ui {

namespace {

// The file name as the file system spells it (QString is UTF-16; Linux paths are bytes).
std::filesystem::path native(const QString& path) {
  return std::filesystem::path(QFile::encodeName(path).toStdString());
}

DecodeLimits attachment_limits() {
  DecodeLimits limits;
  limits.max_file_bytes = kMaxImageBytes;
  return limits;
}

// The engine's message without the file name it starts with ("name: what is wrong").
QString reason(const std::exception& e, const QString& path) {
  QString what = QString::fromStdString(e.what());
  const QString prefix = QString::fromStdString(native(path).string()) + QStringLiteral(": ");
  if (what.startsWith(prefix)) what.remove(0, prefix.size());
  return what;
}

}  // namespace

std::optional<QString> image_problem(const QString& path) {
  const QFileInfo info(path);
  const QString name = info.fileName();
  if (!info.exists() || !info.isFile()) return name + QStringLiteral(": no such file");
  if (info.size() == 0) return name + QStringLiteral(": the file is empty");
  if (info.size() > kMaxImageBytes)
    return name + QStringLiteral(": larger than %1 MiB").arg(kMaxImageBytes >> 20);
  ImageFormat format = ImageFormat::kUnknown;
  try {
    const std::string bytes = read_image_file(native(path), attachment_limits());
    const std::span<const uint8_t> view(reinterpret_cast<const uint8_t*>(bytes.data()),
                                        bytes.size());
    format = sniff_image_format(view);
    decode_image(view, native(path).string(), attachment_limits());
  } catch (const FormatError& e) {
    // No signature and no TGA header (TGA has no signature), or WebP in a build without libwebp.
    if (format == ImageFormat::kUnknown || (format == ImageFormat::kWebp && !webp_supported()))
      return name + QStringLiteral(": not a supported image (PNG, JPEG, WebP, GIF, BMP or TGA)");
    return name + QStringLiteral(": the image is damaged (%1)").arg(reason(e, path));
  } catch (const IoError& e) {
    return name + QStringLiteral(": cannot be read (%1)").arg(QString::fromStdString(e.what()));
  }
  return std::nullopt;
}

QImage image_thumbnail(const QString& path, int edge) {
  RgbImage rgb;
  try {
    rgb = load_image(native(path), attachment_limits());
  } catch (const std::exception&) {
    return {};
  }
  // The engine's pixels as the model sees them (EXIF orientation applied, alpha dropped).
  const QImage image(rgb.pixels.data(), static_cast<int>(rgb.width), static_cast<int>(rgb.height),
                     static_cast<qsizetype>(rgb.width * 3), QImage::Format_RGB888);
  return image.scaled(edge, edge, Qt::KeepAspectRatio, Qt::SmoothTransformation);
}

}  // namespace flashdesk::ui
