// Image files to 8-bit RGB: JPEG through libjpeg-turbo (honouring the EXIF orientation), WebP
// through libwebp (still images; where the build has it), PNG, BMP, GIF (first frame) and TGA
// through stb_image.
//
// Goals: every malformed, truncated or unsupported file is a FormatError naming the file and
// what is wrong, never a crash; a pixel limit checked from the header before any pixel memory
// is allocated (decompression bombs). Non-goals: colour management (ICC profiles are ignored),
// animation, 16-bit output, alpha (dropped: the vision preprocessing is RGB).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace flashdesk {

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // [height, width, 3] row-major RGB

  const uint8_t* at(int64_t x, int64_t y) const { return pixels.data() + (y * width + x) * 3; }
};

struct DecodeLimits {
  // Largest width * height accepted (stored orientation). 40 MP covers photos of today's phones.
  int64_t max_pixels = 40'000'000;
  int64_t max_file_bytes = int64_t{256} << 20;  // load_image only
};

enum class ImageFormat { kJpeg, kPng, kWebp, kBmp, kGif, kTga, kUnknown };
// Sniffed from the first bytes; TGA has no signature and is reported as kUnknown.
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

// Decodes `bytes` (named `name` in errors). Throws FormatError.
RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& name,
                      const DecodeLimits& limits = {});
// FormatError naming `name` when an image file of `size` bytes is over limits.max_file_bytes
// (decode_image checks the bytes it is given; read_image_file the file before reading it).
void check_file_size(uint64_t size, const std::string& name, const DecodeLimits& limits);
// A file's bytes, at most limits.max_file_bytes (else FormatError); IoError when unreadable.
std::string read_image_file(const std::filesystem::path& path, const DecodeLimits& limits = {});
// Reads and decodes a file: IoError when it cannot be read, FormatError when it is bad.
RgbImage load_image(const std::filesystem::path& path, const DecodeLimits& limits = {});

// EXIF orientation (1..8) of a JPEG's APP1 Exif segment; 1 when absent or unreadable.
int jpeg_exif_orientation(std::span<const uint8_t> jpeg);
// The image as displayed for EXIF orientation 1..8 (2-8 mirror and/or rotate; others: as is).
RgbImage apply_orientation(const RgbImage& image, int orientation);

}  // namespace flashdesk
