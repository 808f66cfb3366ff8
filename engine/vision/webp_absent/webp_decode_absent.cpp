// WebP in a build without libwebp (engine/CMakeLists.txt links this file instead of
// engine/vision/webp_decode.cpp): every WebP file is a FormatError that says why.
#include "engine/util/error.h"
#include "engine/vision/webp_decode.h"

namespace flashdesk {
namespace {

[[noreturn]] void refuse(const std::string& name) {
  throw FormatError(name, "WebP: this build of FlashDesk has no libwebp (Debian: libwebp-dev)");
}

}  // namespace

bool webp_supported() {
  return false;
}

std::pair<int64_t, int64_t> webp_size(std::span<const uint8_t>, const std::string& name) {
  refuse(name);
}

RgbImage decode_webp(std::span<const uint8_t>, const std::string& name) {
  refuse(name);
}

}  // namespace flashdesk
