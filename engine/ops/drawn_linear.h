// The layout of a linear a backend draws itself (Backend::draw_linear): the tensors upload_linear
// would make of the checkpoint's bytes of those rows, so every backend that draws agrees.
#pragma once

#include <cstdint>

#include "engine/checkpoint/random_recipe.h"
#include "engine/ops/tensor.h"
#include "engine/ops/weights.h"

namespace flashdesk {

struct DrawnLinearLayout {
  WeightFormat format = WeightFormat::Bf16;
  DType dtype = DType::BF16;  // of the data
  Shape data;                 // [rows, stored columns]
  Shape scale;                // UE8M0 codes; empty (numel 0) for BF16
  bool scaled = false;
};

// Rows [first_row, first_row + rows) of `recipe`'s weight: checks the range (FP8 tiles from a
// whole 32-row group) and says what they are stored as. Engram's FP8 rows are not drawn.
DrawnLinearLayout drawn_linear_layout(const RandomWeightRecipe& recipe, int64_t first_row,
                                      int64_t rows);

// A LinearWeight of `layout` around data and scale tensors (the scale undefined for BF16).
LinearWeight drawn_linear(const RandomWeightRecipe& recipe, const DrawnLinearLayout& layout,
                          Tensor data, Tensor scale);

}  // namespace flashdesk
