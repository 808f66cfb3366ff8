// Image decoding (engine/vision/image_decode.h): every supported format against pictures of
// known colours written by PIL (tools/vision_goldens.py), the EXIF orientation, WebP against
// PIL's decode, and bad input: truncated, corrupt, unsupported and oversized files are
// FormatErrors naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/util/error.h"
#include "engine/vision/image_decode.h"
#include "engine/vision/webp_decode.h"

namespace flashdesk::test {
namespace {

const std::filesystem::path kData = std::filesystem::path(FD_SOURCE_DIR) / "tests/data/vision";

std::vector<uint8_t> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> pixel(const RgbImage& im, int64_t x, int64_t y) {
  const uint8_t* p = im.at(x, y);
  return {p[0], p[1], p[2]};
}

// The message of the FormatError `fn` throws ("" when it throws none).
template <class F>
std::string format_error(F fn) {
  try {
    fn();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

class TinyFormats : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyFormats, DecodesExactColours) {
  const RgbImage im = load_image(kData / ("tiny." + GetParam()));
  ASSERT_EQ(im.width, 4);
  ASSERT_EQ(im.height, 3);
  EXPECT_EQ(pixel(im, 0, 0), (std::vector<uint8_t>{255, 0, 0}));
  EXPECT_EQ(pixel(im, 2, 0), (std::vector<uint8_t>{0, 0, 255}));
  EXPECT_EQ(pixel(im, 1, 1), (std::vector<uint8_t>{255, 255, 0}));
  EXPECT_EQ(pixel(im, 1, 2), (std::vector<uint8_t>{10, 20, 30}));
  EXPECT_EQ(pixel(im, 3, 2), (std::vector<uint8_t>{1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Formats, TinyFormats, ::testing::Values("png", "bmp", "gif", "tga"));

// WebP needs libwebp in the build (setup.sh installs it); a build without it skips these.
class WebpDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!webp_supported()) GTEST_SKIP() << "this build has no libwebp (Debian: libwebp-dev)";
  }
};

TEST_F(WebpDecode, LosslessGivesExactColours) {
  const RgbImage im = load_image(kData / "tiny.webp");
  const RgbImage png = load_image(kData / "tiny.png");
  EXPECT_EQ(im.width, 4);
  EXPECT_EQ(im.height, 3);
  EXPECT_EQ(im.pixels, png.pixels);
}

TEST_F(WebpDecode, PixelsMatchPil) {
  // Lossy (YUV 4:2:0, fancy upsampling) and alpha dropped under transparent pixels, each
  // against PIL's decode + convert("RGB") stored as PNG, byte for byte.
  for (const char* name : {"shapes-500x300.webp", "alpha.webp"}) {
    const RgbImage im = load_image(kData / name);
    const RgbImage pil = load_image(kData / (std::string(name) + ".png"));
    ASSERT_EQ(im.width, pil.width) << name;
    ASSERT_EQ(im.height, pil.height) << name;
    EXPECT_EQ(im.pixels, pil.pixels) << name;
  }
}

TEST_F(WebpDecode, BadFilesAreFormatErrors) {
  const std::vector<uint8_t> whole = file_bytes(kData / "shapes-500x300.webp");
  std::vector<uint8_t> cut(whole.begin(),
                           whole.begin() + static_cast<std::ptrdiff_t>(whole.size() * 2 / 3));
  EXPECT_NE(format_error([&] { decode_image(cut, "cut.webp"); }).find("cut.webp"),
            std::string::npos);
  std::vector<uint8_t> header_only(whole.begin(), whole.begin() + 16);
  EXPECT_NE(format_error([&] { decode_image(header_only, "short.webp"); }), "");
  std::vector<uint8_t> corrupt = whole;
  for (size_t i = 40; i < corrupt.size(); ++i) corrupt[i] = static_cast<uint8_t>(i * 37);
  EXPECT_NE(format_error([&] { decode_image(corrupt, "noise.webp"); }), "");
  const std::string animated = format_error([&] { load_image(kData / "animated.webp"); });
  EXPECT_NE(animated.find("animated WebP"), std::string::npos) << animated;
  DecodeLimits small;
  small.max_pixels = 500 * 300 - 1;
  const std::string big = format_error([&] { decode_image(whole, "big.webp", small); });
  EXPECT_NE(big.find("exceeds the limit"), std::string::npos) << big;
}

TEST(ImageDecode, SniffsSignatures) {
  EXPECT_EQ(sniff_image_format(file_bytes(kData / "oriented-6.jpg")), ImageFormat::kJpeg);
  EXPECT_EQ(sniff_image_format(file_bytes(kData / "tiny.png")), ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format(file_bytes(kData / "tiny.gif")), ImageFormat::kGif);
  EXPECT_EQ(sniff_image_format(file_bytes(kData / "tiny.bmp")), ImageFormat::kBmp);
  EXPECT_EQ(sniff_image_format(file_bytes(kData / "tiny.webp")), ImageFormat::kWebp);
  EXPECT_EQ(sniff_image_format(file_bytes(kData / "tiny.tga")), ImageFormat::kUnknown);
}

TEST(ImageDecode, JpegHonoursExifOrientation) {
  // Stored 32 wide, 64 tall; shown (orientation 6) 64x32: left red, right blue, top-left green.
  const std::vector<uint8_t> bytes = file_bytes(kData / "oriented-6.jpg");
  EXPECT_EQ(jpeg_exif_orientation(bytes), 6);
  const RgbImage im = decode_image(bytes, "oriented-6.jpg");
  ASSERT_EQ(im.width, 64);
  ASSERT_EQ(im.height, 32);
  auto near = [](std::vector<uint8_t> got, std::vector<int> want) {
    for (size_t c = 0; c < 3; ++c)
      if (std::abs(int(got[c]) - want[c]) > 24) return false;  // JPEG loss at quality 95
    return true;
  };
  EXPECT_TRUE(near(pixel(im, 4, 4), {20, 200, 20}));
  EXPECT_TRUE(near(pixel(im, 24, 24), {230, 20, 20}));
  EXPECT_TRUE(near(pixel(im, 50, 8), {20, 20, 230}));
  EXPECT_TRUE(near(pixel(im, 50, 28), {20, 20, 230}));
}

TEST(ImageDecode, JpegPixelsMatchPil) {
  // PIL (libjpeg-turbo too, default islow DCT and fancy upsampling) then exif_transpose.
  const RgbImage im = load_image(kData / "oriented-6.jpg");
  SafetensorsFile golden(kData / "vision-golden.safetensors");
  const SafetensorsEntry* e = golden.find("jpeg.pixels");
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->shape, (std::vector<int64_t>{im.height, im.width, 3}));
  int worst = 0;
  for (size_t i = 0; i < e->nbytes; ++i)
    worst = std::max(worst, std::abs(int(im.pixels[i]) - int(golden.data(*e)[i])));
  EXPECT_EQ(worst, 0);
}

TEST(ImageDecode, OrientationsCompose) {
  RgbImage im{3, 2, {}};
  for (uint8_t i = 0; i < 18; ++i) im.pixels.push_back(i);
  // 6 turns clockwise: the stored bottom-left pixel (0, 1) is shown top-left; 8 undoes 6.
  const RgbImage cw = apply_orientation(im, 6);
  ASSERT_EQ(cw.width, 2);
  ASSERT_EQ(cw.height, 3);
  EXPECT_EQ(pixel(cw, 0, 0), pixel(im, 0, 1));
  EXPECT_EQ(pixel(cw, 1, 0), pixel(im, 0, 0));
  EXPECT_EQ(apply_orientation(cw, 8).pixels, im.pixels);
  // 3 (180) is 2 (mirror) then 4 (flip); 5 (transpose, main diagonal) is 6 then a mirror and
  // its own inverse; 7 (transverse, anti-diagonal) is 6 then a flip.
  EXPECT_EQ(apply_orientation(apply_orientation(im, 2), 4).pixels, apply_orientation(im, 3).pixels);
  EXPECT_EQ(apply_orientation(apply_orientation(im, 5), 5).pixels, im.pixels);
  EXPECT_EQ(apply_orientation(cw, 2).pixels, apply_orientation(im, 5).pixels);
  EXPECT_EQ(apply_orientation(cw, 4).pixels, apply_orientation(im, 7).pixels);
  EXPECT_EQ(apply_orientation(im, 1).pixels, im.pixels);
  EXPECT_EQ(apply_orientation(im, 9).pixels, im.pixels);
}

TEST(ImageDecode, TruncatedFilesAreFormatErrors) {
  for (const char* name : {"oriented-6.jpg", "shapes-500x300.png", "tiny.gif", "tiny.bmp"}) {
    std::vector<uint8_t> b = file_bytes(kData / name);
    b.resize(b.size() * 2 / 3);
    const std::string msg = format_error([&] { decode_image(b, name); });
    EXPECT_NE(msg.find(name), std::string::npos) << name << ": '" << msg << "'";
  }
}

TEST(ImageDecode, CorruptJpegDataIsAFormatError) {
  std::vector<uint8_t> b = file_bytes(kData / "oriented-6.jpg");
  for (size_t i = b.size() / 2; i < b.size() - 2; ++i) b[i] = static_cast<uint8_t>(i * 37);
  EXPECT_NE(format_error([&] { decode_image(b, "x.jpg"); }).find("JPEG"), std::string::npos);
}

TEST(ImageDecode, UnsupportedAndEmptyInputAreFormatErrors) {
  const std::string text = "this is not a picture at all, just text";
  const std::vector<uint8_t> b(text.begin(), text.end());
  EXPECT_NE(format_error([&] { decode_image(b, "notes.txt"); }).find("notes.txt"),
            std::string::npos);
  EXPECT_NE(format_error([&] { decode_image({}, "empty.png"); }).find("empty"), std::string::npos);
}

TEST(ImageDecode, PixelLimitIsCheckedBeforeDecoding) {
  DecodeLimits small;
  small.max_pixels = 500 * 300 - 1;
  const std::string msg = format_error([&] { load_image(kData / "shapes-500x300.png", small); });
  EXPECT_NE(msg.find("exceeds the limit"), std::string::npos) << msg;
  small.max_pixels = 64 * 32 - 1;
  EXPECT_NE(format_error([&] { load_image(kData / "oriented-6.jpg", small); }), "");
}

// An empty IDAT chunk holds no data, so the picture is the same; stb_image would memcpy into a
// null buffer for it (undefined behaviour, found by image_decode_fuzz), so the decoder drops it.
TEST(ImageDecode, EmptyIdatChunksAreHarmless) {
  const std::vector<uint8_t> png = file_bytes(kData / "tiny.png");
  // The first chunk (IHDR) is 8 + 13 + 4 bytes after the 8-byte signature.
  const size_t after_ihdr = 8 + 25;
  const uint8_t empty_idat[12] = {0, 0, 0, 0, 'I', 'D', 'A', 'T', 0x35, 0xAF, 0x06, 0x1E};
  std::vector<uint8_t> with_empty(png.begin(), png.begin() + after_ihdr);
  with_empty.insert(with_empty.end(), std::begin(empty_idat), std::end(empty_idat));
  with_empty.insert(with_empty.end(), png.begin() + after_ihdr, png.end());
  with_empty.insert(with_empty.end() - 12, std::begin(empty_idat), std::end(empty_idat));
  const RgbImage want = decode_image(png, "tiny.png");
  const RgbImage got = decode_image(with_empty, "tiny-with-empty-idat.png");
  EXPECT_EQ(got.width, want.width);
  EXPECT_EQ(got.height, want.height);
  EXPECT_EQ(got.pixels, want.pixels);
  // The fuzzer's inputs: an empty IDAT first, then data that does not inflate; a file that ends
  // inside an empty IDAT chunk.
  for (const char* name : {"png-empty-idat-first.png", "png-empty-idat-cut.png"}) {
    const std::vector<uint8_t> found = file_bytes(kData / name);
    ASSERT_FALSE(found.empty()) << name;
    EXPECT_NE(format_error([&] { decode_image(found, name); }), "") << name;
  }
}

TEST(ImageDecode, MissingFileIsAnIoError) {
  EXPECT_THROW(load_image(kData / "no-such-image.png"), IoError);
}

}  // namespace
}  // namespace flashdesk::test
