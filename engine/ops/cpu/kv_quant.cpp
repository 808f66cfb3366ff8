// Cache rows of the CPU reference backend: FP8 / FP4 quantisation into the byte layouts of
// kv_format.h, dequantisation, and the ratio-m compressor pooling with its pending tokens.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"
#include "engine/util/numeric.h"
#include "engine/util/quant.h"

namespace flashdesk {
namespace cpu {

void quantize_kv_row(KvFormat f, const float* x, int64_t dim, uint8_t* row) {
  const int64_t block = kv_block(f), code_bytes = kv_code_bytes(f, dim);
  for (int64_t b = 0; b < dim / block; ++b) {
    const float* xb = x + b * block;
    uint8_t& scale = row[code_bytes + b];
    switch (f) {
      case KvFormat::Fp8Window:
        scale = quantize_block_fp8(xb, static_cast<size_t>(block), row + b * block);
        break;
      case KvFormat::Fp4Entry:
        scale = quantize_block_fp4_e4m3(xb, static_cast<size_t>(block), row + b * block / 2);
        break;
      case KvFormat::Fp4Key:
        scale = quantize_block_fp4_e8m0(xb, static_cast<size_t>(block), row + b * block / 2);
        break;
    }
  }
}

void dequantize_kv_row(KvFormat f, const uint8_t* row, int64_t dim, float* out) {
  const int64_t block = kv_block(f), code_bytes = kv_code_bytes(f, dim);
  for (int64_t b = 0; b < dim / block; ++b) {
    const uint8_t scale = row[code_bytes + b];
    float* ob = out + b * block;
    switch (f) {
      case KvFormat::Fp8Window:
        dequantize_block_fp8(row + b * block, static_cast<size_t>(block), scale, ob);
        break;
      case KvFormat::Fp4Entry:
        dequantize_block_fp4(row + b * block / 2, static_cast<size_t>(block), e4m3_to_f32(scale),
                             ob);
        break;
      case KvFormat::Fp4Key:
        dequantize_block_fp4(row + b * block / 2, static_cast<size_t>(block), e8m0_to_f32(scale),
                             ob);
        break;
    }
  }
}

}  // namespace cpu

namespace {

void check_rows(KvFormat f, int64_t dim, const Tensor& rows, int64_t first, int64_t n,
                const char* what) {
  FD_CHECK(dim % kv_block(f) == 0, std::string(what) + ": dim not a multiple of the block");
  check_dtype(rows, DType::U8, what);
  FD_CHECK(
      rows.shape().rank() == 2 && rows.dim(1) == kv_row_bytes(f, dim),
      std::string(what) + ": cache rows " + rows.shape().str() + " for dim " + std::to_string(dim));
  FD_CHECK(first >= 0 && first + n <= rows.dim(0), std::string(what) + ": rows out of range");
}

}  // namespace

void CpuReferenceBackend::quantize_rows(KvFormat format, const Tensor& x, Tensor& dst,
                                        int64_t first_row) {
  const int64_t n = x.rows(), dim = x.shape().row_numel();
  check_rows(format, dim, dst, first_row, n, "quantize_rows");
  const int64_t rb = dst.dim(1);
  for (int64_t i = 0; i < n; ++i)
    cpu::quantize_kv_row(format, x.data<float>() + i * dim, dim,
                         dst.bytes() + (first_row + i) * rb);
}

void CpuReferenceBackend::dequantize_rows(KvFormat format, const Tensor& src, int64_t first_row,
                                          Tensor& out) {
  const int64_t n = out.rows(), dim = out.shape().row_numel();
  check_rows(format, dim, src, first_row, n, "dequantize_rows");
  const int64_t rb = src.dim(1);
  for (int64_t i = 0; i < n; ++i)
    cpu::dequantize_kv_row(format, src.bytes() + (first_row + i) * rb, dim,
                           out.data<float>() + i * dim);
}

void CpuReferenceBackend::compressor_pool(const Tensor& kv, const Tensor& score, int64_t ratio,
                                          Tensor& pending_kv, Tensor& pending_score,
                                          int64_t& n_pending, Tensor& out) {
  const int64_t n = kv.rows(), d = kv.shape().row_numel();
  check_shape(score, kv.shape(), "compressor score");
  check_shape(pending_kv, Shape{ratio, d}, "compressor pending kv");
  check_shape(pending_score, Shape{ratio, d}, "compressor pending score");
  FD_CHECK(n_pending >= 0 && n_pending < ratio, "compressor: bad pending count");
  const int64_t total = n_pending + n, groups = total / ratio;
  check_shape(out, Shape{groups, d}, "compressor out");
  // Token t of the virtual sequence [pending | new].
  auto kv_row = [&](int64_t t) {
    return t < n_pending ? pending_kv.data<float>() + t * d
                         : kv.data<float>() + (t - n_pending) * d;
  };
  auto sc_row = [&](int64_t t) {
    return t < n_pending ? pending_score.data<float>() + t * d
                         : score.data<float>() + (t - n_pending) * d;
  };
  std::vector<float> p(static_cast<size_t>(ratio));
  for (int64_t g = 0; g < groups; ++g) {
    float* o = out.data<float>() + g * d;
    for (int64_t c = 0; c < d; ++c) {
      float mx = -INFINITY;
      for (int64_t t = 0; t < ratio; ++t) mx = std::max(mx, sc_row(g * ratio + t)[c]);
      float sum = 0.0f;
      for (int64_t t = 0; t < ratio; ++t) sum += (p[t] = std::exp(sc_row(g * ratio + t)[c] - mx));
      float acc = 0.0f;
      for (int64_t t = 0; t < ratio; ++t) acc += kv_row(g * ratio + t)[c] * (p[t] / sum);
      o[c] = flashdesk::round_bf16(acc);
    }
  }
  // Move the trailing incomplete group to the front of the pending buffers.
  const int64_t left = total - groups * ratio;
  std::vector<float> tmp_kv(static_cast<size_t>(left * d)), tmp_sc(static_cast<size_t>(left * d));
  for (int64_t t = 0; t < left; ++t) {
    std::memcpy(&tmp_kv[t * d], kv_row(groups * ratio + t), static_cast<size_t>(d) * 4);
    std::memcpy(&tmp_sc[t * d], sc_row(groups * ratio + t), static_cast<size_t>(d) * 4);
  }
  if (left > 0) {  // memcpy from an empty vector's null data() is undefined (UBSan)
    std::memcpy(pending_kv.data<float>(), tmp_kv.data(), tmp_kv.size() * 4);
    std::memcpy(pending_score.data<float>(), tmp_sc.data(), tmp_sc.size() * 4);
  }
  n_pending = left;
}

}  // namespace flashdesk
