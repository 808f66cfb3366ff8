// Processed size, letterbox and patches of the V4.1 image preprocessing.
#include "engine/vision/image_preprocess.h"

#include <algorithm>
#include <cmath>

#include "engine/util/error.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

int64_t span_tokens(PixelSize s, const VisionConfig& vc) {
  return static_cast<int64_t>(llm_grid(s, vc).token_count());
}

// Python's round() of a double: half to even (nearbyint in the default rounding mode).
int64_t round_half_even(double v) {
  return static_cast<int64_t>(std::nearbyint(v));
}

}  // namespace

ImageGrid llm_grid(PixelSize s, const VisionConfig& vc) {
  const int64_t p = vc.patch_size, r = vc.downsample_ratio;
  return ImageGrid{static_cast<int>((s.height / p + r - 1) / r),
                   static_cast<int>((s.width / p + r - 1) / r)};
}

PixelSize processed_size(PixelSize in, const VisionConfig& vc) {
  FD_CHECK(in.height > 0 && in.width > 0, "processed_size: empty image");
  double h = static_cast<double>(in.height), w = static_cast<double>(in.width);
  if (in.height * in.width < vc.min_pixels) {
    const double scale = std::sqrt(static_cast<double>(vc.min_pixels) / (h * w));
    h = std::trunc(h * scale);
    w = std::trunc(w * scale);
  }
  const int64_t p = vc.patch_size;
  PixelSize s{round_up(static_cast<int64_t>(h), p), round_up(static_cast<int64_t>(w), p)};
  if (span_tokens(s, vc) <= vc.max_image_tokens) return s;
  // Too many tokens: the largest whole-cell grid of the same aspect within the budget
  // (n_h * (n_w + 1) + 2 <= max with n_h = r * n_w), scaled by the limiting side.
  const double cell = static_cast<double>(p * vc.downsample_ratio);
  const double r = static_cast<double>(s.height) / static_cast<double>(s.width);
  const double max_w = std::sqrt((static_cast<double>(vc.max_image_tokens) - 2.0) / r + 0.25) - 0.5;
  const double max_h = r * max_w;
  const double ratio = std::min(std::floor(max_w) * cell / static_cast<double>(s.width),
                                std::floor(max_h) * cell / static_cast<double>(s.height));
  auto side = [&](int64_t v) {
    return std::max(p, static_cast<int64_t>(static_cast<double>(v) * ratio) / p * p);
  };
  return PixelSize{side(s.height), side(s.width)};
}

RgbImage letterbox(const RgbImage& in, int64_t width, int64_t height, uint8_t grey) {
  // ImageOps.contain: keep the aspect ratio, fill the limiting side.
  const double im_ratio = static_cast<double>(in.width) / static_cast<double>(in.height);
  const double dest_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t rw = width, rh = height;
  if (im_ratio > dest_ratio)
    rh = round_half_even(static_cast<double>(in.height) / static_cast<double>(in.width) *
                         static_cast<double>(width));
  else if (im_ratio < dest_ratio)
    rw = round_half_even(static_cast<double>(in.width) / static_cast<double>(in.height) *
                         static_cast<double>(height));
  rw = std::max<int64_t>(rw, 1);
  rh = std::max<int64_t>(rh, 1);
  RgbImage resized = resize_bicubic(in, rw, rh);
  if (rw == width && rh == height) return resized;
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.assign(static_cast<size_t>(width * height * 3), grey);
  const int64_t x0 = rw != width ? round_half_even(static_cast<double>(width - rw) * 0.5) : 0;
  const int64_t y0 = rw != width ? 0 : round_half_even(static_cast<double>(height - rh) * 0.5);
  for (int64_t y = 0; y < rh; ++y)
    std::copy_n(resized.at(0, y), rw * 3, out.pixels.data() + ((y0 + y) * width + x0) * 3);
  return out;
}

PreprocessedImage preprocess_image(const RgbImage& image, const VisionConfig& vc) {
  const PixelSize size = processed_size(PixelSize{image.height, image.width}, vc);
  const RgbImage img = letterbox(image, size.width, size.height);
  const int64_t p = vc.patch_size;
  PreprocessedImage out;
  out.vit_h = size.height / p;
  out.vit_w = size.width / p;
  out.grid = llm_grid(size, vc);
  const int64_t per_patch = 3 * p * p;
  out.patches.resize(static_cast<size_t>(out.vit_h * out.vit_w * per_patch));
  for (int64_t py = 0; py < out.vit_h; ++py)
    for (int64_t px = 0; px < out.vit_w; ++px) {
      float* dst = out.patches.data() + (py * out.vit_w + px) * per_patch;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t y = 0; y < p; ++y)
          for (int64_t x = 0; x < p; ++x) {
            const float v = static_cast<float>(img.at(px * p + x, py * p + y)[c]) / 255.0f;
            dst[(c * p + y) * p + x] = round_bf16((v - 0.5f) / 0.5f);
          }
    }
  return out;
}

}  // namespace flashdesk
