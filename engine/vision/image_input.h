// An image ready for a prompt: decoded, preprocessed for the model's vision config, with the
// digest of its file bytes (what identifies the image to the session store and KV keys).
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "engine/vision/image_decode.h"
#include "engine/vision/image_preprocess.h"

namespace flashdesk {

struct PreparedImage {
  std::string name;                             // the file path (or a caller's label), for messages
  std::string digest;                           // SHA-256 of the encoded file bytes, lowercase hex
  int64_t source_width = 0, source_height = 0;  // as displayed (after EXIF orientation)
  PreprocessedImage pixels;
};

// FormatError for bad image data, IoError for an unreadable file.
PreparedImage prepare_image_bytes(std::span<const uint8_t> bytes, const std::string& name,
                                  const VisionConfig& vc, const DecodeLimits& limits = {});
PreparedImage prepare_image_file(const std::filesystem::path& path, const VisionConfig& vc,
                                 const DecodeLimits& limits = {});

}  // namespace flashdesk
