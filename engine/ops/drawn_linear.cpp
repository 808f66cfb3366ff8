// The layout of drawn linears (drawn_linear.h).
#include "engine/ops/drawn_linear.h"

#include <string>
#include <utility>

#include "engine/util/error.h"

namespace flashdesk {

DrawnLinearLayout drawn_linear_layout(const RandomWeightRecipe& recipe, int64_t first_row,
                                      int64_t rows) {
  using Format = RandomTensorPlan::Format;
  const std::string name(recipe.weight);
  FD_CHECK(first_row >= 0 && rows > 0 && first_row + rows <= recipe.rows,
           name + ": rows to draw out of range");
  DrawnLinearLayout l;
  l.dtype = recipe.dtype;
  switch (recipe.format) {
    case Format::Fp4Rows:
      FD_CHECK(recipe.dtype == DType::I8 && recipe.cols % 32 == 0,
               name + ": FP4 rows of whole 32-value blocks");
      l.format = WeightFormat::Fp4Row;
      l.data = Shape{rows, recipe.cols / 2};
      l.scale = Shape{rows, recipe.cols / 32};
      l.scaled = true;
      break;
    case Format::Fp8Tiles:
      FD_CHECK(recipe.dtype == DType::F8_E4M3 && first_row % 32 == 0 &&
                   (rows % 32 == 0 || first_row + rows == recipe.rows),
               name + ": FP8 tiles are drawn in whole 32-row groups");
      l.format = WeightFormat::Fp8Block;
      l.data = Shape{rows, recipe.cols};
      l.scale = Shape{(rows + 31) / 32, (recipe.cols + 31) / 32};
      l.scaled = true;
      break;
    case Format::Plain:
      FD_CHECK(recipe.dtype == DType::BF16, name + ": only BF16 plain weights are drawn");
      l.format = WeightFormat::Bf16;
      l.data = Shape{rows, recipe.cols};
      break;
    case Format::Fp8Rows:
      FD_CHECK(false, name + ": FP8 rows (Engram tables) are not drawn");
  }
  return l;
}

LinearWeight drawn_linear(const RandomWeightRecipe& recipe, const DrawnLinearLayout& layout,
                          Tensor data, Tensor scale) {
  LinearWeight lw;
  lw.format = layout.format;
  lw.name = std::string(recipe.weight);
  lw.out = layout.data[0];
  lw.in = recipe.cols;
  lw.data = std::move(data);
  if (layout.scaled) lw.scale = std::move(scale);
  return lw;
}

}  // namespace flashdesk
