// Engram on the CUDA backend (MODEL-REFERENCE §7, docs/numerics.md "Engram"): the gather of FP8
// table rows (dequantised, exact) and the per-stream sigmoid gate that adds the value to the hc
// streams, one block per (row, stream).
#include <cmath>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/stream_io.cuh"

namespace flashdesk {
namespace cuda {
namespace {

// e [n, cols*width]: row i, column c*width + j = table row ids[i][c], value j. The host checks the
// ids before the launch; an id outside the table would give NaN rather than a stray read.
__global__ void engram_gather_kernel(const uint8_t* codes, const uint8_t* scales, int64_t rows,
                                     int64_t width, const int64_t* ids, int64_t n, int64_t cols,
                                     float* e) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * cols * width) return;
  const int64_t j = i % width, rc = i / width;  // rc = row * cols + c
  const int64_t r = ids[rc];
  if (r < 0 || r >= rows) {
    e[i] = __int_as_float(0x7FC00000);
    return;
  }
  e[i] = e4m3_to_f32(codes[r * width + j]) * e8m0_to_f32(scales[r * (width / 32) + j / 32]);
}

template <class S>
__global__ void engram_update_kernel(S* X, const float* kv, const float* qw, const float* kw,
                                     const uint8_t* masked, int64_t hc, int64_t d, float eps,
                                     float inv_sqrt_d) {
  FD_GRID_PROLOGUE();
  __shared__ double scratch[32];
  const int64_t row = blockIdx.x / hc, k = blockIdx.x % hc;
  S* x = X + (row * hc + k) * d;
  const float* key = kv + row * (hc + 1) * d + k * d;
  const float* value = kv + row * (hc + 1) * d + hc * d;
  // FP32 products, summed in FP64 and rounded once: the reference's correctly rounded sums
  // (engine/ops/cpu/engram.cpp says why the gate needs them).
  double dot_sum = 0, xx = 0, kk = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float xj = load_stream(x + j);
    dot_sum += __fmul_rn(__fmul_rn(xj, __fmul_rn(qw[k * d + j], kw[k * d + j])), key[j]);
    xx += __fmul_rn(xj, xj);
    kk += __fmul_rn(key[j], key[j]);
  }
  dot_sum = block_sum(dot_sum, scratch);
  xx = block_sum(xx, scratch);
  kk = block_sum(kk, scratch);
  const float rx = 1.0f / sqrtf(static_cast<float>(xx / static_cast<double>(d)) + eps);
  const float rk = 1.0f / sqrtf(static_cast<float>(kk / static_cast<double>(d)) + eps);
  float dot = static_cast<float>(dot_sum) * rx * rk * inv_sqrt_d;
  const float mag = sqrtf(fmaxf(fabsf(dot), 1e-6f));
  const bool off = masked && masked[row];
  const float gate = off ? 0.0f : 1.0f / (1.0f + expf(-(dot < 0 ? -mag : (dot > 0 ? mag : 0.0f))));
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    store_stream(x + j, round_bf16(__fadd_rn(load_stream(x + j), __fmul_rn(gate, value[j]))));
}

}  // namespace
}  // namespace cuda

using cuda::blocks_for;
using cuda::ptr;

void CudaBackend::engram_gather(const QuantTable& table, std::span<const int64_t> ids, Tensor& e) {
  check_engram_gather_args(table, ids, e);
  const int64_t n = e.rows(), width = table.width(), rows = table.rows();
  const int64_t cols = width > 0 ? e.dim(1) / width : 0;
  if (n * cols * width == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  if (table.codes.host_accessible()) {  // upload_table: the table stayed in host memory
    Backend& host = host_backend();     // the CPU's gather on the host's ids: no wait
    Tensor rows_out = host.alloc(DType::F32, e.shape());
    host.engram_gather(table, ids, rows_out);
    write(e, rows_out.bytes(), rows_out.nbytes());
    return;
  }
  for (int64_t id : ids) FD_CHECK(id >= 0 && id < rows, "engram: row id out of range");
  Tensor dev_ids = ctx_->upload_span(ids, DType::I64);
  FD_LAUNCH(cuda::engram_gather_kernel, dim3(blocks_for(n * cols * width, 256)), dim3(256), 0,
            ctx_->stream(), ptr<const uint8_t>(table.codes), ptr<const uint8_t>(table.scales), rows,
            width, ptr<const int64_t>(dev_ids), n, cols, ptr<float>(e));
}

void CudaBackend::engram_update(Tensor& X, const Tensor& kv, const Tensor& q_weight,
                                const Tensor& k_weight, std::span<const uint8_t> masked_rows,
                                float eps) {
  const int64_t n = X.rows(), hc = q_weight.dim(0), d = q_weight.dim(1);
  check_shape(X, Shape{n, hc, d}, "engram streams");
  check_shape(kv, Shape{n, (hc + 1) * d}, "engram kv");
  check_shape(k_weight, q_weight.shape(), "engram k_weight");
  FD_CHECK(masked_rows.empty() || static_cast<int64_t>(masked_rows.size()) == n,
           "engram: one mask flag per row");
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  Tensor mask;
  if (!masked_rows.empty()) mask = ctx_->upload_span(masked_rows, DType::U8);
  const float inv_sqrt_d = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  cuda::with_stream_type(X, "engram_update", [&](auto tag) {
    using S = cuda::StreamOf<decltype(tag)>;
    FD_LAUNCH(cuda::engram_update_kernel<S>, dim3(static_cast<unsigned>(n * hc)), dim3(256), 0,
              ctx_->stream(), ptr<S>(X), ptr<const float>(kv), ptr<const float>(q_weight),
              ptr<const float>(k_weight), mask.defined() ? ptr<const uint8_t>(mask) : nullptr, hc,
              d, eps, inv_sqrt_d);
  });
}

}  // namespace flashdesk
