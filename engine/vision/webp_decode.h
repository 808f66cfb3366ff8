// WebP still images to 8-bit RGB through libwebp. A build without libwebp (it is not on the GPU
// machine's package list) links engine/vision/webp_absent instead, whose functions say so.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "engine/vision/image_decode.h"

namespace flashdesk {

// Whether this build decodes WebP.
bool webp_supported();
// (width, height) from the bitstream's header, before any pixel memory; FormatError naming
// `name` when the header is bad, the image is animated, or the build reads no WebP.
std::pair<int64_t, int64_t> webp_size(std::span<const uint8_t> bytes, const std::string& name);
// The pixels; alpha is dropped, as PIL's convert("RGB") does. FormatError when corrupt.
RgbImage decode_webp(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace flashdesk
