// Checking the image files a user attaches before they reach the composer (and the engine).
#pragma once

#include <QImage>
#include <QString>
#include <optional>

namespace flashdesk::ui {

// Bytes above which an attachment is refused (the vision encoder downsizes anyway).
constexpr qint64 kMaxImageBytes = 32 << 20;

// Why `path` cannot be attached (missing, too large, not an image, damaged), in words; empty
// when the engine reads it (PNG, JPEG, WebP, GIF, BMP or TGA: engine/vision/image_decode.h).
std::optional<QString> image_problem(const QString& path);

// A thumbnail of at most `edge` pixels per side, from the engine's decode; null when the file
// does not decode.
QImage image_thumbnail(const QString& path, int edge);

}  // namespace flashdesk::ui
