// What a backend needs to draw one weight of a synthetic checkpoint itself (a GPU: the bytes then
// never pass through host memory, and 475 GiB of V4.1-Flash take seconds instead of minutes of
// host threads): the row streams, the value rule, the storage format, and the host's own
// generator for the rows a device cannot vouch for (its libm is not the host's; see
// docs/checkpoint-format.md "Synthetic weights").
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "engine/checkpoint/random_tensor_writer.h"
#include "engine/util/dtype.h"

namespace flashdesk {

struct RandomWeightRecipe {
  std::string_view weight;  // the tensor names (the checkpoint's specs, which outlive this)
  std::string_view scale;   // empty for BF16
  RandomTensorPlan::Format format = RandomTensorPlan::Format::Plain;
  DType dtype = DType::BF16;   // of the weight: BF16, F8_E4M3 (32 x 32 tiles) or I8 (packed FP4)
  int64_t rows = 0, cols = 0;  // logical [rows, cols] (packed FP4: cols = 2 x bytes a row)
  uint64_t stream = 0;         // row r draws the splitmix64 sequence seeded mix(stream + r)
  double std = 0, mean = 0;    // value = mean + std * z (random_init.h)
  // Writes rows [r0, r1) of the weight and of its scale as make-random writes them, from the
  // first byte of `weight` and of `scale` (FP8 tiles: r0 a multiple of 32, and r1 too unless it
  // is the last row).
  std::function<void(int64_t r0, int64_t r1, uint8_t* weight, uint8_t* scale)> host_rows;
};

}  // namespace flashdesk
