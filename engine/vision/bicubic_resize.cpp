// PIL's bicubic resize of 8-bit images (Pillow src/libImaging/Resample.c, reimplemented from its
// documented algorithm): per output pixel a window of input pixels weighted by the a = -0.5
// cubic kernel stretched by the downscale factor (antialiasing), weights normalised to sum 1
// and rounded to 22-bit fixed point; accumulation in integers with a rounding offset.
#include <algorithm>
#include <cmath>

#include "engine/vision/image_preprocess.h"

namespace flashdesk {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// Fixed-point weights of every output pixel along one axis: window start, length, weights.
struct AxisWeights {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> k;  // [out, ksize]
};

AxisWeights axis_weights(int64_t in_size, int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 2.0 * filterscale;
  AxisWeights a;
  a.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.k.assign(static_cast<size_t>(out_size * a.ksize), 0);
  std::vector<double> w(static_cast<size_t>(a.ksize));
  for (int64_t o = 0; o < out_size; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size);
    const int64_t n = std::min(hi - lo, a.ksize);
    double total = 0.0;
    for (int64_t x = 0; x < n; ++x)
      total += w[static_cast<size_t>(x)] =
          bicubic((static_cast<double>(x + lo) - center + 0.5) / filterscale);
    for (int64_t x = 0; x < n; ++x) {
      const double v = total != 0.0 ? w[static_cast<size_t>(x)] / total : w[static_cast<size_t>(x)];
      const double f = v * static_cast<double>(1 << kPrecisionBits);
      a.k[static_cast<size_t>(o * a.ksize + x)] = static_cast<int32_t>(v < 0 ? -0.5 + f : 0.5 + f);
    }
    a.first.push_back(lo);
    a.count.push_back(std::max<int64_t>(n, 0));
  }
  return a;
}

uint8_t clip8(int64_t v) {
  if (v >= (int64_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// One pass along x (horizontal) or y: out has the other axis of `in`.
RgbImage resample_axis(const RgbImage& in, int64_t out_size, bool horizontal) {
  const AxisWeights a = axis_weights(horizontal ? in.width : in.height, out_size);
  RgbImage out;
  out.width = horizontal ? out_size : in.width;
  out.height = horizontal ? in.height : out_size;
  out.pixels.resize(static_cast<size_t>(out.width * out.height * 3));
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t o = horizontal ? x : y;
      const int32_t* k = a.k.data() + o * a.ksize;
      for (int c = 0; c < 3; ++c) {
        int64_t acc = int64_t{1} << (kPrecisionBits - 1);
        for (int64_t t = 0; t < a.count[static_cast<size_t>(o)]; ++t) {
          const int64_t src = a.first[static_cast<size_t>(o)] + t;
          acc += int64_t{in.at(horizontal ? src : x, horizontal ? y : src)[c]} * k[t];
        }
        out.pixels[static_cast<size_t>((y * out.width + x) * 3 + c)] = clip8(acc);
      }
    }
  return out;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& in, int64_t width, int64_t height) {
  if (width == in.width && height == in.height) return in;
  RgbImage h = width != in.width ? resample_axis(in, width, true) : in;
  return height != in.height ? resample_axis(h, height, false) : h;
}

}  // namespace flashdesk
