// Decoding image files to RGB: format sniffing, the pixel limit, libjpeg-turbo for JPEG (plus
// the EXIF orientation), libwebp for WebP and stb_image for the rest, each failure a FormatError.
#include "engine/vision/image_decode.h"

#include <turbojpeg.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "engine/util/error.h"
#include "engine/util/file_io.h"
#include "engine/vision/stb_image_config.h"
#include "engine/vision/webp_decode.h"

namespace flashdesk {
namespace {

void check_pixels(int64_t w, int64_t h, const std::string& name, const DecodeLimits& limits) {
  if (w <= 0 || h <= 0)
    throw FormatError(name,
                      "image header: bad size " + std::to_string(w) + "x" + std::to_string(h));
  if (w * h > limits.max_pixels)
    throw FormatError(name, "image of " + std::to_string(w) + "x" + std::to_string(h) +
                                " pixels exceeds the limit of " +
                                std::to_string(limits.max_pixels) + " pixels");
}

struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() {
    if (h) tjDestroy(h);
  }
};

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const std::string& name,
                     const DecodeLimits& limits) {
  TjHandle tj;
  if (!tj.h) throw FormatError(name, "JPEG: cannot start libjpeg-turbo");
  // libjpeg-turbo takes a non-const buffer pointer but does not write through it.
  auto* src = const_cast<unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.h, src, size, &w, &h, &subsamp, &colorspace) != 0)
    throw FormatError(name, std::string("JPEG header: ") + tjGetErrorStr2(tj.h));
  check_pixels(w, h, name, limits);
  RgbImage img;
  img.width = w;
  img.height = h;
  img.pixels.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  // Warnings (a truncated scan, bad Huffman data) stop decoding: the pixels would be guesses.
  // LIMITSCANS refuses progressive files with absurd scan counts (a CPU-time bomb).
  const int flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
  if (tjDecompress2(tj.h, src, size, img.pixels.data(), w, 0, h, TJPF_RGB, flags) != 0)
    throw FormatError(name, std::string("corrupt or truncated JPEG: ") + tjGetErrorStr2(tj.h));
  return apply_orientation(img, jpeg_exif_orientation(bytes));
}

uint32_t le32(std::span<const uint8_t> b, size_t at) {
  return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8 | uint32_t(b[at + 2]) << 16 |
         uint32_t(b[at + 3]) << 24;
}

// stb_image reads zeros past the end of BMP and TGA data instead of failing: a truncated file
// is caught here from the sizes its header implies (uncompressed layouts; RLE data is not
// sized up front and a short RLE file decodes with a black tail).
void check_complete(std::span<const uint8_t> b, const std::string& name, ImageFormat format) {
  uint64_t need = 0;
  if (format == ImageFormat::kBmp && b.size() >= 34) {
    const uint64_t declared = le32(b, 2), offset = le32(b, 10);
    const uint64_t width = le32(b, 18), bpp = uint64_t(b[28]) | uint64_t(b[29]) << 8;
    const int32_t height = static_cast<int32_t>(le32(b, 22));
    const uint64_t rows = height < 0 ? uint64_t(-int64_t{height}) : uint64_t(height);
    need = declared;
    if (le32(b, 30) == 0 && width < (1u << 16) && rows < (1u << 16))  // BI_RGB
      need = std::max(need, offset + (width * bpp + 31) / 32 * 4 * rows);
  } else if (format == ImageFormat::kTga && b.size() >= 18 && (b[2] == 2 || b[2] == 3)) {
    const uint64_t id_len = b[0], map_len = uint64_t(b[5]) | uint64_t(b[6]) << 8;
    const uint64_t map_bytes = b[1] ? map_len * ((uint64_t(b[7]) + 7) / 8) : 0;
    const uint64_t w = uint64_t(b[12]) | uint64_t(b[13]) << 8;
    const uint64_t h = uint64_t(b[14]) | uint64_t(b[15]) << 8;
    need = 18 + id_len + map_bytes + w * h * ((uint64_t(b[16]) + 7) / 8);
  }
  if (need > b.size())
    throw FormatError(name, "truncated image: the header implies " + std::to_string(need) +
                                " bytes, the file has " + std::to_string(b.size()));
}

uint32_t be32(std::span<const uint8_t> b, size_t at) {
  return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 |
         uint32_t(b[at + 3]);
}

// A PNG without its empty IDAT chunks (they hold no data: the image is the same), or nothing when
// it has none. stb_image copies an IDAT's bytes with memcpy into a buffer it has not allocated
// yet when the first IDAT is empty: memcpy(NULL, p, 0), undefined behaviour (found by
// image_decode_fuzz), also when the file ends inside that chunk. The walk stops at the first
// other chunk that does not fit; stb judges the rest.
std::optional<std::vector<uint8_t>> without_empty_idat(std::span<const uint8_t> b) {
  std::vector<uint8_t> out;
  size_t at = 8, kept_to = 0;  // out holds b[0, kept_to) minus the dropped chunks
  bool dropped = false;
  while (at + 8 <= b.size()) {  // length and type; the data and the CRC may be cut off
    const uint32_t length = be32(b, at);
    const uint64_t end = at + 12 + uint64_t{length};
    if (length == 0 && std::memcmp(b.data() + at + 4, "IDAT", 4) == 0) {
      out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(kept_to),
                 b.begin() + static_cast<std::ptrdiff_t>(at));
      kept_to = static_cast<size_t>(std::min<uint64_t>(end, b.size()));
      dropped = true;
    }
    if (end > b.size()) break;
    at = static_cast<size_t>(end);
  }
  if (!dropped) return std::nullopt;
  out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(kept_to), b.end());
  return out;
}

struct StbPixels {
  stbi_uc* p = nullptr;
  ~StbPixels() { stbi_image_free(p); }
};

RgbImage decode_stb(std::span<const uint8_t> bytes, const std::string& name,
                    const DecodeLimits& limits, ImageFormat format) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) throw FormatError(name, "image file too large");
  std::optional<std::vector<uint8_t>> cleaned;
  if (format == ImageFormat::kPng && (cleaned = without_empty_idat(bytes))) bytes = *cleaned;
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = static_cast<int>(bytes.size());
  int w = 0, h = 0, comp = 0;
  const char* kind = format == ImageFormat::kPng   ? "PNG"
                     : format == ImageFormat::kBmp ? "BMP"
                     : format == ImageFormat::kGif ? "GIF"
                                                   : "TGA";
  if (!stbi_info_from_memory(data, len, &w, &h, &comp)) {
    if (format == ImageFormat::kUnknown)
      throw FormatError(name,
                        "unsupported image format (JPEG, PNG, WebP, BMP, GIF and TGA are read)");
    throw FormatError(name, std::string(kind) + " header: " + stbi_failure_reason());
  }
  check_pixels(w, h, name, limits);
  check_complete(bytes, name, format == ImageFormat::kUnknown ? ImageFormat::kTga : format);
  StbPixels px;
  px.p = stbi_load_from_memory(data, len, &w, &h, &comp, 3);
  if (!px.p)
    throw FormatError(name,
                      std::string("corrupt or truncated ") + kind + ": " + stbi_failure_reason());
  check_pixels(w, h, name, limits);  // the frame may differ from the header's screen size
  RgbImage img;
  img.width = w;
  img.height = h;
  img.pixels.assign(px.p, px.p + static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  return img;
}

}  // namespace

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  auto starts = [&](std::initializer_list<uint8_t> sig) {
    return b.size() >= sig.size() && std::equal(sig.begin(), sig.end(), b.begin());
  };
  if (starts({0xFF, 0xD8, 0xFF})) return ImageFormat::kJpeg;
  if (starts({0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A})) return ImageFormat::kPng;
  if (starts({'G', 'I', 'F', '8'})) return ImageFormat::kGif;
  if (starts({'B', 'M'})) return ImageFormat::kBmp;
  if (b.size() >= 12 && std::equal(b.begin(), b.begin() + 4, "RIFF") &&
      std::equal(b.begin() + 8, b.begin() + 12, "WEBP"))
    return ImageFormat::kWebp;
  return ImageFormat::kUnknown;
}

void check_file_size(uint64_t size, const std::string& name, const DecodeLimits& limits) {
  if (size > static_cast<uint64_t>(limits.max_file_bytes))
    throw FormatError(name, "image file of " + std::to_string(size) +
                                " bytes exceeds the limit of " +
                                std::to_string(limits.max_file_bytes));
}

RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& name,
                      const DecodeLimits& limits) {
  if (bytes.empty()) throw FormatError(name, "empty image file");
  check_file_size(bytes.size(), name, limits);  // bytes read by the caller, not by read_image_file
  const ImageFormat format = sniff_image_format(bytes);
  if (format == ImageFormat::kJpeg) return decode_jpeg(bytes, name, limits);
  if (format == ImageFormat::kWebp) {
    const auto [w, h] = webp_size(bytes, name);
    check_pixels(w, h, name, limits);
    return decode_webp(bytes, name);
  }
  // TGA has no signature (kUnknown): stb recognises it from its header fields.
  return decode_stb(bytes, name, limits, format);
}

std::string read_image_file(const std::filesystem::path& path, const DecodeLimits& limits) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError("cannot read image " + path.string() + ": " + ec.message());
  check_file_size(size, path.string(), limits);  // before reading it
  return read_small_file(path, static_cast<size_t>(limits.max_file_bytes));
}

RgbImage load_image(const std::filesystem::path& path, const DecodeLimits& limits) {
  const std::string bytes = read_image_file(path, limits);
  return decode_image(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      path.string(), limits);
}

}  // namespace flashdesk
