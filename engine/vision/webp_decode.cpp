// libwebp's simple decoding API: the header first (so the pixel limit is checked before the
// buffer exists), then the pixels straight into our buffer.
#include "engine/vision/webp_decode.h"

#include <webp/decode.h>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

WebPBitstreamFeatures features_of(std::span<const uint8_t> bytes, const std::string& name) {
  WebPBitstreamFeatures features{};
  const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) throw FormatError(name, "truncated WebP header");
  if (status != VP8_STATUS_OK)
    throw FormatError(name, "WebP header: libwebp status " + std::to_string(int(status)));
  // The simple API decodes still images only; animation is a non-goal (image_decode.h).
  if (features.has_animation)
    throw FormatError(name, "animated WebP is not read (save one frame as PNG)");
  return features;
}

}  // namespace

bool webp_supported() {
  return true;
}

std::pair<int64_t, int64_t> webp_size(std::span<const uint8_t> bytes, const std::string& name) {
  const WebPBitstreamFeatures f = features_of(bytes, name);
  return {f.width, f.height};
}

RgbImage decode_webp(std::span<const uint8_t> bytes, const std::string& name) {
  const WebPBitstreamFeatures f = features_of(bytes, name);
  RgbImage img;
  img.width = f.width;
  img.height = f.height;
  img.pixels.resize(static_cast<size_t>(f.width) * static_cast<size_t>(f.height) * 3);
  // A truncated or corrupt bitstream returns null: no partial picture is kept.
  if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), img.pixels.data(), img.pixels.size(),
                         static_cast<int>(f.width) * 3))
    throw FormatError(name, "corrupt or truncated WebP");
  return img;
}

}  // namespace flashdesk
