// EXIF orientation of JPEG files: finding tag 0x0112 in IFD0 of the APP1 "Exif" segment, and
// turning the stored pixels into the displayed image. Bad or missing EXIF data means "as
// stored" (1): cameras write broken EXIF often, and the pixels are still good.
#include <algorithm>
#include <optional>

#include "engine/vision/image_decode.h"

namespace flashdesk {
namespace {

// A bounds-checked view of the TIFF structure inside the Exif segment.
class TiffReader {
 public:
  explicit TiffReader(std::span<const uint8_t> tiff) : t_(tiff) {}
  bool little_endian() const { return le_; }
  bool read_header(uint32_t& ifd0) {
    if (t_.size() < 8) return false;
    if (t_[0] == 'I' && t_[1] == 'I')
      le_ = true;
    else if (t_[0] == 'M' && t_[1] == 'M')
      le_ = false;
    else
      return false;
    const auto magic = u16(2);
    const auto off = u32(4);
    if (!magic || *magic != 42 || !off) return false;
    ifd0 = *off;
    return true;
  }
  std::optional<uint16_t> u16(size_t at) const {
    if (at > t_.size() || t_.size() - at < 2) return std::nullopt;
    return le_ ? uint16_t(t_[at] | t_[at + 1] << 8) : uint16_t(t_[at] << 8 | t_[at + 1]);
  }
  std::optional<uint32_t> u32(size_t at) const {
    auto lo = u16(le_ ? at : at + 2), hi = u16(le_ ? at + 2 : at);
    if (!lo || !hi) return std::nullopt;
    return uint32_t(*hi) << 16 | *lo;
  }

 private:
  std::span<const uint8_t> t_;
  bool le_ = true;
};

int orientation_in_tiff(std::span<const uint8_t> tiff) {
  TiffReader r(tiff);
  uint32_t ifd0 = 0;
  if (!r.read_header(ifd0)) return 1;
  auto count = r.u16(ifd0);
  if (!count) return 1;
  for (uint32_t i = 0; i < *count; ++i) {
    const size_t entry = size_t(ifd0) + 2 + size_t(i) * 12;
    auto tag = r.u16(entry), type = r.u16(entry + 2), value = r.u16(entry + 8);
    if (!tag || !type || !value) return 1;
    if (*tag == 0x0112 && *type == 3) return *value >= 1 && *value <= 8 ? *value : 1;
  }
  return 1;
}

}  // namespace

int jpeg_exif_orientation(std::span<const uint8_t> jpeg) {
  // Markers after SOI: FF xx, length (big-endian, includes itself); stop at SOS.
  size_t at = 2;
  while (at + 4 <= jpeg.size()) {
    if (jpeg[at] != 0xFF) return 1;
    const uint8_t marker = jpeg[at + 1];
    if (marker == 0xFF) {
      ++at;  // fill byte
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;
    const size_t len = size_t(jpeg[at + 2]) << 8 | jpeg[at + 3];
    if (len < 2 || at + 2 + len > jpeg.size()) return 1;
    const auto body = jpeg.subspan(at + 4, len - 2);
    static constexpr uint8_t kExif[6] = {'E', 'x', 'i', 'f', 0, 0};
    if (marker == 0xE1 && body.size() >= 6 && std::equal(kExif, kExif + 6, body.begin()))
      return orientation_in_tiff(body.subspan(6));
    at += 2 + len;
  }
  return 1;
}

RgbImage apply_orientation(const RgbImage& in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int64_t W = in.width, H = in.height;
  const bool swap = orientation >= 5;  // 5-8 exchange width and height
  RgbImage out;
  out.width = swap ? H : W;
  out.height = swap ? W : H;
  out.pixels.resize(in.pixels.size());
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sx = x, sy = y;  // the stored pixel shown at (x, y)
      switch (orientation) {
        case 2:
          sx = W - 1 - x;
          break;  // mirrored left-right
        case 3:
          sx = W - 1 - x;
          sy = H - 1 - y;
          break;  // rotated 180
        case 4:
          sy = H - 1 - y;
          break;  // mirrored top-bottom
        case 5:
          sx = y;
          sy = x;
          break;  // transposed
        case 6:
          sx = y;
          sy = H - 1 - x;
          break;  // stored rotated: turn 90 clockwise
        case 7:
          sx = W - 1 - y;
          sy = H - 1 - x;
          break;  // transversed
        case 8:
          sx = W - 1 - y;
          sy = x;
          break;  // turn 90 counter-clockwise
      }
      const uint8_t* s = in.at(sx, sy);
      uint8_t* d = out.pixels.data() + (y * out.width + x) * 3;
      d[0] = s[0], d[1] = s[1], d[2] = s[2];
    }
  return out;
}

}  // namespace flashdesk
