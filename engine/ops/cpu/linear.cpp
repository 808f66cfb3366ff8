// Linear layers of the CPU reference backend: the input as the mode says (FP8 act_quant or as
// is), weights dequantised row by row, FP32 accumulation, BF16 or FP32 output.
#include <algorithm>
#include <bit>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"
#include "engine/util/quant.h"

namespace flashdesk {
namespace cpu {

void dequantize_weight_row(const LinearWeight& w, int64_t row, float* out) {
  const int64_t in = w.in, block = w.block;
  const uint8_t* data = w.data.bytes();
  switch (w.format) {
    case WeightFormat::Fp8Block: {
      const uint8_t* codes = data + row * in;
      const uint8_t* scales = w.scale.bytes() + (row / block) * w.scale.dim(1);
      for (int64_t b0 = 0; b0 < in; b0 += block) {
        const float s = e8m0_to_f32(scales[b0 / block]);  // one power of two per 32x32 tile
        const int64_t end = std::min(in, b0 + block);
        for (int64_t c = b0; c < end; ++c) out[c] = kE4M3ToF32[codes[c]] * s;
      }
      break;
    }
    case WeightFormat::Fp4Row: {
      const uint8_t* packed = data + row * (in / 2);
      const uint8_t* scales = w.scale.bytes() + row * (in / block);
      for (int64_t b0 = 0; b0 < in; b0 += block) {
        const float s = e8m0_to_f32(scales[b0 / block]);
        for (int64_t c = b0; c < b0 + block; c += 2) {
          out[c] = kE2M1ToF32[packed[c / 2] & 0xF] * s;
          out[c + 1] = kE2M1ToF32[packed[c / 2] >> 4] * s;
        }
      }
      break;
    }
    case WeightFormat::Bf16: {
      // BF16 -> F32 is a 16-bit shift; the row's bytes may be unaligned in the mapped file, so
      // they are copied to an aligned scratch row first.
      thread_local std::vector<uint16_t> bits;
      bits.resize(static_cast<size_t>(in));
      std::memcpy(bits.data(), data + 2 * row * in, static_cast<size_t>(in) * 2);
      for (int64_t c = 0; c < in; ++c) out[c] = std::bit_cast<float>(uint32_t{bits[c]} << 16);
      break;
    }
    case WeightFormat::F32:
      std::memcpy(out, data + 4 * row * in, static_cast<size_t>(in) * 4);
      break;
  }
}

void act_quant_row(const float* x, int64_t n, float* out) {
  std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
  fake_quant_fp8(out, static_cast<size_t>(n), 32);
}

}  // namespace cpu

namespace {

// x prepared as the linear reads it: act-quantised copy, or the tensor itself.
const float* prepared_input(const Tensor& x, int64_t k, LinearInput input,
                            std::vector<float>& storage) {
  const int64_t n = x.rows();
  if (input == LinearInput::AsIs) return x.data<float>();
  storage.resize(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n; ++i) cpu::act_quant_row(x.data<float>() + i * k, k, &storage[i * k]);
  return storage.data();
}

}  // namespace

namespace cpu {

// The official FP8/FP4 GEMM (docs/numerics.md "Linear layers"): per K-block of 32, the block's
// products summed on their own (cpu::dot's order within the block), then the block partials
// added in K order. Activations and weights are passed dequantised: their scales are powers of
// two, so each partial equals the official unscaled partial times both scales, exactly.
float blocked_dot(const float* x, const float* w, int64_t k) {
  float acc = 0.0f;
  int64_t b0 = 0;
  for (; b0 + 32 <= k; b0 += 32) acc += dot(x + b0, w + b0, 32);
  if (b0 < k) acc += dot(x + b0, w + b0, k - b0);
  return acc;
}

}  // namespace cpu

void CpuReferenceBackend::linear(const Tensor& x, const LinearWeight& w, LinearMode mode,
                                 Tensor& y) {
  const int64_t n = x.rows(), k = w.in, out = w.out;
  check_dtype(x, DType::F32, "linear x");
  FD_CHECK(x.shape().row_numel() == k,
           w.name + ": input " + x.shape().str() + " but K = " + std::to_string(k));
  FD_CHECK(y.rows() == n && y.shape().row_numel() == out, w.name + ": output " + y.shape().str());
  std::vector<float> xq_storage;
  const float* xq = prepared_input(x, k, mode.input, xq_storage);
  float* yd = y.data<float>();
  const bool round = mode.output == LinearOutput::Bf16;
  const bool blocked = cpu::accumulates_by_block(w);
  pool_->parallel_for(out, cpu::rows_per_task(k * std::max<int64_t>(n, 1)),
                      [&](int64_t begin, int64_t end) {
                        std::vector<float> wrow(static_cast<size_t>(k));
                        for (int64_t o = begin; o < end; ++o) {
                          cpu::dequantize_weight_row(w, o, wrow.data());
                          for (int64_t i = 0; i < n; ++i) {
                            const float v = blocked ? cpu::blocked_dot(xq + i * k, wrow.data(), k)
                                                    : cpu::dot(xq + i * k, wrow.data(), k);
                            yd[i * out + o] = round ? flashdesk::round_bf16(v) : v;
                          }
                        }
                      });
}

void CpuReferenceBackend::grouped_linear(const Tensor& x, const LinearWeight& w, int64_t groups,
                                         Tensor& y) {
  const int64_t n = x.rows(), in_g = w.in, out = w.out;
  FD_CHECK(groups > 0 && out % groups == 0, w.name + ": rows not divisible into groups");
  const int64_t out_g = out / groups, x_cols = groups * in_g;
  FD_CHECK(x.shape().row_numel() == x_cols, w.name + ": grouped input " + x.shape().str());
  FD_CHECK(y.rows() == n && y.shape().row_numel() == out, w.name + ": grouped output");
  const float* xd = x.data<float>();
  float* yd = y.data<float>();
  pool_->parallel_for(
      out, cpu::rows_per_task(in_g * std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
        std::vector<float> wrow(static_cast<size_t>(in_g));
        for (int64_t o = begin; o < end; ++o) {
          cpu::dequantize_weight_row(w, o, wrow.data());
          const int64_t g = o / out_g;
          for (int64_t i = 0; i < n; ++i)
            yd[i * out + o] =
                flashdesk::round_bf16(cpu::dot(xd + i * x_cols + g * in_g, wrow.data(), in_g));
        }
      });
}

}  // namespace flashdesk
