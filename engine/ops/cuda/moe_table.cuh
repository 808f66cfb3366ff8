// The experts of a MoE layer as its kernels read them: a device table of each expert's matrix
// pointers (moe.cu builds and uploads it; moe.cu's decode kernels and moe_grouped.cu's prefill
// kernels read it).
#pragma once

#include <cstdint>

#include "engine/ops/cuda/no_padding.h"

namespace flashdesk::cuda {

// One expert's three matrices (w1, w3: [inter, dim]; w2: [dim, inter]).
FD_NO_PADDING_BEGIN
struct ExpertEntry {
  const uint8_t* data[3];
  const uint8_t* scale[3];
  int64_t scale_cols[3];
  int32_t format[3];  // WeightFormat
  int32_t padding = 0;
  int64_t inter, dim;
};
FD_NO_PADDING_END

}  // namespace flashdesk::cuda
