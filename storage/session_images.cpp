// Reading users' image files for stored turns and naming the prompt's image spans by digest.
#include "storage/session_images.h"

#include <algorithm>
#include <cctype>

#include "engine/util/error.h"
#include "engine/vision/image_decode.h"

namespace flashdesk::storage {

UserImage read_user_image(const ChatEngine& engine, const std::filesystem::path& file) {
  const std::string bytes = read_image_file(file);  // the engine applies its own size limit
  UserImage out;
  out.stored.bytes.assign(bytes.begin(), bytes.end());
  out.prepared = engine.prepare_image_bytes(out.stored.bytes, file.string());
  out.stored.mime_type = image_mime_type(out.stored.bytes, file);
  out.digest = image_digest(out.stored.bytes);
  return out;
}

std::string image_mime_type(std::span<const uint8_t> bytes, const std::filesystem::path& name) {
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kJpeg:
      return "image/jpeg";
    case ImageFormat::kPng:
      return "image/png";
    case ImageFormat::kWebp:
      return "image/webp";
    case ImageFormat::kBmp:
      return "image/bmp";
    case ImageFormat::kGif:
      return "image/gif";
    case ImageFormat::kTga:
    case ImageFormat::kUnknown:
      break;
  }
  std::string ext = name.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".tga" ? "image/x-tga" : "application/octet-stream";
}

std::vector<ImageSpan> prompt_image_spans(std::span<const flashdesk::ImageSpan> rendered,
                                          std::span<const ImageDigest> digests) {
  FD_CHECK(rendered.size() == digests.size(),
           "prompt_image_spans: " + std::to_string(rendered.size()) + " image spans but " +
               std::to_string(digests.size()) + " digests");
  std::vector<ImageSpan> out;
  out.reserve(rendered.size());
  for (size_t i = 0; i < rendered.size(); ++i)
    out.push_back(ImageSpan{.digest = digests[i],
                            .begin = static_cast<int64_t>(rendered[i].begin),
                            .length = static_cast<int64_t>(rendered[i].end - rendered[i].begin)});
  return out;
}

}  // namespace flashdesk::storage
