// Weight handles of the backend interface: linear layers in their checkpoint formats, expert
// triples and quantised lookup tables, uploaded to a backend once when the model is loaded.
#pragma once

#include <cstdint>
#include <string>

#include "engine/ops/tensor.h"

namespace flashdesk {

// How a linear weight is stored (docs/model-spec.md §2.2). The backend dequantises on the fly.
enum class WeightFormat : uint8_t {
  Fp8Block,  // F8_E4M3 codes [out, in] + F8_E8M0 scales [ceil(out/b), ceil(in/b)] (b x b tiles)
  Fp4Row,    // packed E2M1 [out, in/2] (low nibble = even column) + F8_E8M0 scales [out, in/b]
  Bf16,      // BF16 [out, in]
  F32,       // F32 [out, in]
};

// "FP8", "FP4", "BF16", "F32": how tables and messages name a stored format.
inline const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Fp8Block:
      return "FP8";
    case WeightFormat::Fp4Row:
      return "FP4";
    case WeightFormat::Bf16:
      return "BF16";
    case WeightFormat::F32:
      return "F32";
  }
  return "?";
}

struct LinearWeight {
  WeightFormat format = WeightFormat::F32;
  int64_t out = 0;     // output features (rows)
  int64_t in = 0;      // input features (columns, K)
  int64_t block = 32;  // FP8 tile edge or FP4 K-block
  Tensor data;
  Tensor scale;      // E8M0 codes; undefined for Bf16 / F32
  std::string name;  // checkpoint name, for messages
};

// What a linear does to its input and output (docs/numerics.md "Linear layers"):
// quantised weights get the FP8 act_quant of the input and a BF16 output; BF16 linears use the
// input as is with a BF16 output; FP32 linears keep the FP32 output.
enum class LinearInput : uint8_t { ActQuantFp8, AsIs };
enum class LinearOutput : uint8_t { Bf16, F32 };
struct LinearMode {
  LinearInput input = LinearInput::AsIs;
  LinearOutput output = LinearOutput::Bf16;
};
inline constexpr LinearMode kQuantLinear{LinearInput::ActQuantFp8, LinearOutput::Bf16};
inline constexpr LinearMode kBf16Linear{LinearInput::AsIs, LinearOutput::Bf16};
inline constexpr LinearMode kF32Linear{LinearInput::AsIs, LinearOutput::F32};

// One SwiGLU expert: w1 (gate) and w3 (up) [inter, dim], w2 (down) [dim, inter].
struct ExpertWeights {
  LinearWeight w1;
  LinearWeight w3;
  LinearWeight w2;
};

// A row-quantised lookup table (Engram embedding): F8_E4M3 codes [rows, width] with one E8M0
// scale per 32 columns [rows, width/32].
struct QuantTable {
  Tensor codes;
  Tensor scales;
  int64_t rows() const { return codes.defined() ? codes.dim(0) : 0; }
  int64_t width() const { return codes.defined() ? codes.dim(1) : 0; }
};

}  // namespace flashdesk
