// Dequantisation of checkpoint weights to FP32: the plain reference the model's loaders and
// kernels are tested against (docs/model-spec.md §2.2).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/checkpoint/checkpoint.h"

namespace flashdesk {

// FP8 E4M3 codes [rows, cols] with one UE8M0 scale per block_rows x block_cols tile; `scales`
// is [ceil(rows/block_rows), ceil(cols/block_cols)] row-major. out[r, c] = e4m3(code) *
// 2^(scale - 127). Dense V4.1 weights use 32 x 32 tiles, Engram tables 1 x 32.
void dequant_fp8(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                 int64_t block_rows, int64_t block_cols, float* out);

// Packed FP4 E2M1 [rows, cols/2] bytes (low nibble = even column) with one E8M0 scale per 32
// columns ([rows, cols/32]); `cols` is the logical column count (even, multiple of 32).
void dequant_fp4(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols,
                 float* out);

// BF16 bit patterns (as stored, little-endian) to FP32; exact.
void dequant_bf16(const uint8_t* bf16, int64_t n, float* out);

// A checkpoint weight as an FP32 matrix in its logical shape, e.g. "layers.0.attn.wq_a.weight"
// (FP8: uses the sibling ".scale"), "layers.0.ffn.experts.3.w1.weight" (FP4: logical columns =
// 2 x stored bytes), or any BF16/F32 tensor. Throws FormatError when the scale's shape does not
// fit the weight.
std::vector<float> dequantize_tensor(const Checkpoint& checkpoint, std::string_view weight_name);

// The logical [rows, cols] of a weight (cols doubled for packed FP4); 1-D tensors are [1, n].
std::pair<int64_t, int64_t> logical_matrix_shape(const TensorView& weight);

}  // namespace flashdesk
