// Decoding, digesting and preprocessing one image for a prompt.
#include "engine/vision/image_input.h"

#include "engine/util/sha256.h"

namespace flashdesk {

PreparedImage prepare_image_bytes(std::span<const uint8_t> bytes, const std::string& name,
                                  const VisionConfig& vc, const DecodeLimits& limits) {
  PreparedImage p;
  p.name = name;
  Sha256 sha;
  sha.update(bytes);
  p.digest = Sha256::hex(sha.finish());
  const RgbImage rgb = decode_image(bytes, name, limits);
  p.source_width = rgb.width;
  p.source_height = rgb.height;
  p.pixels = preprocess_image(rgb, vc);
  return p;
}

PreparedImage prepare_image_file(const std::filesystem::path& path, const VisionConfig& vc,
                                 const DecodeLimits& limits) {
  const std::string bytes = read_image_file(path, limits);
  return prepare_image_bytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      path.string(), vc, limits);
}

}  // namespace flashdesk
