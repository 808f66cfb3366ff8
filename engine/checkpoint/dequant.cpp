// Scalar dequantisation of FP8 block-scaled, packed FP4 and BF16 checkpoint tensors.
#include "engine/checkpoint/dequant.h"

#include <cstring>

#include "engine/checkpoint/checkpoint_match.h"
#include "engine/util/error.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

std::string scale_name_for(std::string_view weight_name) {
  constexpr std::string_view kWeight = ".weight";
  std::string name(weight_name);
  if (name.ends_with(kWeight)) name.resize(name.size() - kWeight.size());
  return name + ".scale";
}

std::vector<int64_t> view_shape(const TensorView& t) {
  return {t.shape.begin(), t.shape.end()};
}

}  // namespace

void dequant_fp8(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                 int64_t block_rows, int64_t block_cols, float* out) {
  const int64_t scale_cols = ceil_div(cols, block_cols);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* scale_row = scales + (r / block_rows) * scale_cols;
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = e4m3_to_f32(codes[r * cols + c]) * e8m0_to_f32(scale_row[c / block_cols]);
  }
}

void dequant_fp4(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols,
                 float* out) {
  const int64_t scale_cols = cols / 32;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 2) {
      const uint8_t byte = packed[r * (cols / 2) + c / 2];
      const float s = e8m0_to_f32(scales[r * scale_cols + c / 32]);
      out[r * cols + c] = e2m1_to_f32(e2m1_low(byte)) * s;
      out[r * cols + c + 1] = e2m1_to_f32(e2m1_high(byte)) * s;
    }
}

void dequant_bf16(const uint8_t* bf16, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bf16 + 2 * i, 2);
    out[i] = bf16_to_f32(h);
  }
}

std::pair<int64_t, int64_t> logical_matrix_shape(const TensorView& w) {
  const int64_t rows = w.shape.size() >= 2 ? w.numel() / w.shape.back() : 1;
  const int64_t cols = w.shape.empty() ? 1 : w.shape.back();
  return {rows, w.dtype == DType::I8 ? 2 * cols : cols};
}

std::vector<float> dequantize_tensor(const Checkpoint& ckpt, std::string_view weight_name) {
  const TensorView w = ckpt.tensor(weight_name);
  const auto [rows, cols] = logical_matrix_shape(w);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const std::string where = ckpt.dir().string();
  auto bad_scale = [&](const TensorView& s) {
    return FormatError(where, "scale " + std::string(s.name) + " " + shape_string(view_shape(s)) +
                                  " does not fit weight " + std::string(weight_name) + " " +
                                  shape_string(view_shape(w)));
  };
  switch (w.dtype) {
    case DType::F8_E4M3: {
      const TensorView s = ckpt.tensor(scale_name_for(weight_name));
      const int64_t srows = s.shape.size() == 2 ? s.shape[0] : -1;
      const int64_t block_rows = srows == rows ? 1 : 32;  // Engram rows: 1 x 32; dense: 32 x 32
      if (s.dtype != DType::F8_E8M0 || s.shape.size() != 2 || srows != ceil_div(rows, block_rows) ||
          s.shape[1] != ceil_div(cols, 32))
        throw bad_scale(s);
      dequant_fp8(w.data, s.data, rows, cols, block_rows, 32, out.data());
      break;
    }
    case DType::I8: {
      const TensorView s = ckpt.tensor(scale_name_for(weight_name));
      if (s.dtype != DType::F8_E8M0 || s.shape.size() != 2 || s.shape[0] != rows ||
          s.shape[1] * 32 != cols)
        throw bad_scale(s);
      dequant_fp4(w.data, s.data, rows, cols, out.data());
      break;
    }
    case DType::BF16:
      dequant_bf16(w.data, rows * cols, out.data());
      break;
    case DType::F32:
      std::memcpy(out.data(), w.data, out.size() * sizeof(float));
      break;
    default:
      throw FormatError(where, "tensor " + std::string(weight_name) + " has dtype " +
                                   std::string(dtype_name(w.dtype)) +
                                   ", which is not a weight format");
  }
  return out;
}

}  // namespace flashdesk
