// Fuzz target: image decoding (every format, the EXIF reader, the pixel limit) and the
// preprocessing of whatever decodes must accept or throw FormatError, never crash. The pixel
// limit is small so that huge declared sizes are refused rather than allocated.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/util/error.h"
#include "engine/vision/image_decode.h"
#include "engine/vision/image_preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  flashdesk::DecodeLimits limits;
  limits.max_pixels = 1 << 20;
  flashdesk::jpeg_exif_orientation(bytes);
  try {
    const flashdesk::RgbImage im = flashdesk::decode_image(bytes, "fuzz", limits);
    if (im.width * im.height <= 4096) {  // keep iterations fast: small pictures only
      flashdesk::VisionConfig vc;
      vc.min_pixels = 1;
      vc.max_image_tokens = 64;
      flashdesk::preprocess_image(im, vc);
    }
  } catch (const flashdesk::FormatError&) {
  }
  return 0;
}
