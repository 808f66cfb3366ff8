// Drawing a synthetic checkpoint's weight on the device (Backend::draw_linear, draw_into_host):
// random_init.h's splitmix64 rows and Box-Muller pairs in double precision, quantised as
// make-random's writer quantises (random_tensor_writer.cpp), so a linear's bytes need no host
// memory and no copy, and an Engram table's no host thread.
//
// The device's log, sin and cos are not the host's (CUDA's are within 1-2 units in the last
// place, glibc's within 1), and make-random's bytes are the host's. So each value whose double
// lies within a margin of a float rounding boundary is flagged, with its unit (a row; for FP8
// tiles, a group of 32 rows), and the host generates the flagged units (RandomWeightRecipe::
// host_rows): round to nearest is monotonic, so a value whose whole margin rounds to one float
// gives that float on both. About one value in two million is flagged.
#pragma once

#include <cstdint>

#include "engine/checkpoint/random_tensor_writer.h"
#include "engine/ops/cuda/no_padding.h"

namespace flashdesk::cuda {

class DeviceContext;

// The margin: 2^kDrawMarginLog2 of a value's Gaussian term std * z, plus a quarter of that of the
// value. The chain log -> sqrt -> product with sin or cos -> times std differs between two libms
// within 1-2 units in the last place each by under 2^-49 of the term, and the sum with the mean
// by at most that plus one unit of the value (2^-52): the margin is 8 times the bound.
inline constexpr int kDrawMarginLog2 = -46;

// A kernel parameter: its padding spelled out (no_padding.h).
FD_NO_PADDING_BEGIN
struct RandomDraw {
  RandomTensorPlan::Format format = RandomTensorPlan::Format::Plain;
  int32_t padding0 = 0;
  int64_t first_row = 0, rows = 0;  // the rows drawn (FP8 tiles: first_row a multiple of 32)
  int64_t cols = 0;                 // logical columns (FP4: twice the bytes)
  uint64_t stream = 0;              // row r's seed: SplitMix64::mix(stream + r)
  double std = 0, mean = 0;
  int margin_log2 = kDrawMarginLog2;  // the tests widen it to send many units to the host
  int32_t padding1 = 0;
};
FD_NO_PADDING_END
template <>
inline constexpr bool kNoPaddingDeclared<RandomDraw> = true;  // its doubles

// The units a draw flags: its rows, or for FP8 tiles its 32-row groups.
int64_t draw_units(const RandomDraw& d);
// Writes rows [first_row, first_row + rows) of the weight from `weight` on and their scale rows
// from `scale` on (none for BF16), and flags[u] = 1 (else 0) for each unit u whose bytes the host
// must write; ordered on ctx's stream.
void draw_random_weight(DeviceContext& ctx, const RandomDraw& d, uint8_t* weight, uint8_t* scale,
                        uint8_t* flags);

}  // namespace flashdesk::cuda
