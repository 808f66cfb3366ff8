// The backend-independent parts of the interface: zero-filled allocation and the format rules
// of linear weights.
#include "engine/ops/backend.h"

#include <string>

namespace flashdesk {

Tensor Backend::zeros(DType dtype, Shape shape) {
  Tensor t = alloc(dtype, shape);
  fill_zero(t);
  return t;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

void expect_scale_shape(const TensorView& scale, int64_t rows, int64_t cols, const std::string& w) {
  FD_CHECK(scale.dtype == DType::F8_E8M0 && scale.shape.size() == 2 && scale.dim(0) == rows &&
               scale.dim(1) == cols,
           "scale of " + w + " must be F8_E8M0 [" + std::to_string(rows) + ", " +
               std::to_string(cols) + "]");
}

}  // namespace

LinearWeight Backend::upload_linear(const TensorView& w, const TensorView* scale) {
  LinearWeight lw;
  lw.name = std::string(w.name);
  FD_CHECK(w.shape.size() == 2, lw.name + ": a linear weight is 2-D");
  lw.out = w.dim(0);
  switch (w.dtype) {
    case DType::F8_E4M3:
      lw.format = WeightFormat::Fp8Block;
      lw.in = w.dim(1);
      FD_CHECK(scale != nullptr, lw.name + ": FP8 weight without scale");
      expect_scale_shape(*scale, ceil_div(lw.out, lw.block), ceil_div(lw.in, lw.block), lw.name);
      break;
    case DType::I8:
      lw.format = WeightFormat::Fp4Row;
      lw.in = w.dim(1) * 2;
      FD_CHECK(scale != nullptr, lw.name + ": FP4 weight without scale");
      FD_CHECK(lw.in % lw.block == 0, lw.name + ": FP4 K must be a multiple of 32");
      expect_scale_shape(*scale, lw.out, lw.in / lw.block, lw.name);
      break;
    case DType::BF16:
      lw.format = WeightFormat::Bf16;
      lw.in = w.dim(1);
      break;
    case DType::F32:
      lw.format = WeightFormat::F32;
      lw.in = w.dim(1);
      break;
    default:
      FD_CHECK(false,
               lw.name + ": unsupported linear weight dtype " + std::string(dtype_name(w.dtype)));
  }
  lw.data = upload(w);
  if (scale != nullptr && lw.format != WeightFormat::Bf16 && lw.format != WeightFormat::F32)
    lw.scale = upload(*scale);
  return lw;
}

}  // namespace flashdesk
