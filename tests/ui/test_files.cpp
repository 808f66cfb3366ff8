// Files the UI tests drop and attach (real PNGs and deliberately broken ones), and the KV block
// files a data folder holds.
#include <QFile>
#include <QImage>
#include <filesystem>

#include "storage/kv_block_file.h"
#include "storage/storage_layout.h"

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

int kv_block_files(const QString& data_dir) {
  const auto kv = storage::StorageLayout::in(data_dir.toStdString()).kv_dir();
  int n = 0;
  if (!std::filesystem::exists(kv)) return 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kv))
    n += entry.is_regular_file() && entry.path().extension() == storage::kBlockFileExtension;
  return n;
}

}  // namespace flashdesk::ui::test
