// Row-wise ops of the CUDA backend: RMSNorm, interleaved partial RoPE (and its inverse), scaling,
// BF16 rounding, FP4 fake-quant of index queries, embedding lookup. Multiplies and adds that the
// reference writes as two roundings are kept apart (__fmul_rn), so results differ from the CPU
// only where a sum's order does.
#include <algorithm>
#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/row_norm.cuh"
#include "engine/ops/cuda/stream_io.cuh"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kRowThreads = 256;

// One block per row: y = bf16(w * (x * rsqrt(mean(x^2) + eps))); y may be x.
__global__ void rms_norm_kernel(const float* x, const float* w, float eps, int64_t d, float* y) {
  FD_GRID_PROLOGUE();
  __shared__ float scratch[32];
  const float* row = x + blockIdx.x * d;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) ss += row[j] * row[j];
  const float r = 1.0f / sqrtf(block_sum(ss, scratch) / static_cast<float>(d) + eps);
  float* out = y + blockIdx.x * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = __fmul_rn(row[j], r);
    out[j] = round_bf16(w ? __fmul_rn(w[j], v) : v);
  }
}

// The same for rows of at most kNormHeld * blockDim.x values, each thread's values and weights
// loaded at once and held (row_norm.cuh): the loop above waits on a load each round, twice (a
// decode step's 5120-wide norm: 7 µs on the H200). The same arithmetic in the same order.
__global__ void rms_norm_held_kernel(const float* x, const float* w, float eps, int64_t d,
                                     float* y) {
  FD_GRID_PROLOGUE();
  __shared__ float scratch[32];
  rms_norm_held_row(x + blockIdx.x * d, w, eps, d, scratch, y + blockIdx.x * d);
}

// One thread per (row, group of kRopeHeads heads, pair): the pair (2p, 2p+1) of the heads' last
// rope_dim values, the angle's cosine and sine (in FP64) evaluated once for the group's heads and
// their pairs loaded together (a thread per head made a prefill's 64-head query rotation 64
// evaluations of each angle, 161 µs at 8K tokens).
constexpr int64_t kRopeHeads = 8;
__global__ void rope_kernel(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t pairs,
                            const int64_t* positions, const float* inv_freq, float sign) {
  FD_GRID_PROLOGUE();
  const int64_t groups = (heads + kRopeHeads - 1) / kRopeHeads;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * groups * pairs) return;
  const int64_t p = i % pairs, g = (i / pairs) % groups, row = i / (pairs * groups);
  float c, s;
  rope_angle(positions[row], inv_freq[p], sign, &c, &s);
  float* v = x + (row * heads + g * kRopeHeads) * head_dim + (head_dim - 2 * pairs) + 2 * p;
  const int64_t count = lmin(kRopeHeads, heads - g * kRopeHeads);
  float pair[kRopeHeads][2];
  FD_UNROLL
  for (int64_t h = 0; h < kRopeHeads; ++h)
    if (h < count) {
      pair[h][0] = v[h * head_dim];
      pair[h][1] = v[h * head_dim + 1];
    }
  FD_UNROLL
  for (int64_t h = 0; h < kRopeHeads; ++h)
    if (h < count) {
      rope_rotate(pair[h], c, s);
      v[h * head_dim] = pair[h][0];
      v[h * head_dim + 1] = pair[h][1];
    }
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void round_bf16_kernel(float* x, int64_t n) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = round_bf16(x[i]);
}

// One thread per value, the `block` lanes of a scale block (dividing 32) sharing its amax by
// shuffles: FP4 codes with a UE8M0 scale, written back dequantised.
__global__ void fake_quant_fp4_lanes_kernel(float* x, int64_t n, int block) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float v = i < n ? x[i] : 0.0f;  // every lane stays for the shuffles
  float amax = fabsf(v);
  for (int o = block / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, o));
  const float s = e8m0_to_f32(fp4_e8m0_scale_code(amax));
  if (i < n) x[i] = e2m1_to_f32(fp4_code(v, s)) * s;
}

// One thread per block of `block` values (blocks that do not divide a warp): the same.
__global__ void fake_quant_fp4_kernel(float* x, int64_t n_blocks, int64_t block) {
  FD_GRID_PROLOGUE();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= n_blocks) return;
  float* v = x + b * block;
  float amax = 0.0f;
  for (int64_t j = 0; j < block; ++j) amax = fmaxf(amax, fabsf(v[j]));
  const float s = e8m0_to_f32(fp4_e8m0_scale_code(amax));
  for (int64_t j = 0; j < block; ++j) v[j] = e2m1_to_f32(fp4_code(v[j], s)) * s;
}

// rows [n, d] = table[ids] (BF16 widened), X [n, hc, d] = the row in every stream.
template <class S>
__global__ void embed_kernel(const uint16_t* table, const int32_t* ids, int64_t n, int64_t d,
                             int64_t hc, float* rows, S* X) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * d) return;
  const int64_t t = i / d, j = i % d;
  const float v = bf16_bits_to_f32(table[static_cast<int64_t>(ids[t]) * d + j]);
  rows[i] = v;
  for (int64_t k = 0; k < hc; ++k) store_stream(X + (t * hc + k) * d + j, v);
}

}  // namespace
}  // namespace cuda

using cuda::blocks_for;
using cuda::ptr;

void CudaBackend::rms_norm(const Tensor& x, const Tensor* weight, float eps, Tensor& y) {
  const int last = x.shape().rank() - 1;
  const int64_t d = x.dim(last), n = x.numel() / d;
  check_dtype(x, DType::F32, "rms_norm x");
  FD_CHECK(y.numel() == x.numel(), "rms_norm: output " + y.shape().str());
  if (weight) check_shape(*weight, Shape{d}, "rms_norm weight");
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  // Few rows (decode): a wider block per row (row_norm.cuh).
  int64_t threads = cuda::kRowThreads;
  if (n < ctx_->multiprocessors()) threads = cuda::decode_norm_threads(d);
  FD_LAUNCH(d <= cuda::kNormHeld * threads ? &cuda::rms_norm_held_kernel : &cuda::rms_norm_kernel,
            dim3(static_cast<unsigned>(n)), dim3(static_cast<unsigned>(threads)), 0, ctx_->stream(),
            ptr<const float>(x), weight ? ptr<const float>(*weight) : nullptr, eps, d,
            ptr<float>(y));
}

void CudaBackend::rope(Tensor& x, int64_t head_dim, std::span<const int64_t> positions,
                       std::span<const float> inv_freq, bool inverse) {
  const int64_t n = x.rows(), row = x.shape().row_numel();
  const int64_t pairs = static_cast<int64_t>(inv_freq.size());
  FD_CHECK(row % head_dim == 0 && 2 * pairs <= head_dim, "rope: shape " + x.shape().str());
  FD_CHECK(static_cast<int64_t>(positions.size()) == n, "rope: one position per row");
  const int64_t heads = row / head_dim;
  const int64_t work = n * ((heads + cuda::kRopeHeads - 1) / cuda::kRopeHeads) * pairs;
  if (work == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  Tensor pos = ctx_->upload_span(positions, DType::I64);
  Tensor freq = ctx_->upload_span(inv_freq, DType::F32);
  FD_LAUNCH(cuda::rope_kernel, dim3(blocks_for(work, 256)), dim3(256), 0, ctx_->stream(),
            ptr<float>(x), n, heads, head_dim, pairs, ptr<const int64_t>(pos),
            ptr<const float>(freq), inverse ? -1.0f : 1.0f);
}

void CudaBackend::scale(Tensor& x, float factor) {
  if (x.numel() == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  FD_LAUNCH(cuda::scale_kernel, dim3(blocks_for(x.numel(), 256)), dim3(256), 0, ctx_->stream(),
            ptr<float>(x), x.numel(), factor);
}

void CudaBackend::round_bf16(Tensor& x) {
  if (x.numel() == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  FD_LAUNCH(cuda::round_bf16_kernel, dim3(blocks_for(x.numel(), 256)), dim3(256), 0, ctx_->stream(),
            ptr<float>(x), x.numel());
}

void CudaBackend::fake_quant_fp4_e8m0(Tensor& x, int64_t block) {
  const int64_t d = x.dim(x.shape().rank() - 1);
  FD_CHECK(d % block == 0 && block % 2 == 0, "fake_quant_fp4_e8m0: row not a multiple of block");
  const int64_t blocks = x.numel() / block;
  if (blocks == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  if (32 % block == 0)  // a lane per value: the serial loop was 12 µs of a decode step's row
    FD_LAUNCH(cuda::fake_quant_fp4_lanes_kernel, dim3(blocks_for(x.numel(), 256)), dim3(256), 0,
              ctx_->stream(), ptr<float>(x), x.numel(), static_cast<int>(block));
  else
    FD_LAUNCH(cuda::fake_quant_fp4_kernel, dim3(blocks_for(blocks, 128)), dim3(128), 0,
              ctx_->stream(), ptr<float>(x), blocks, block);
}

void CudaBackend::embed(const Tensor& table, std::span<const int32_t> ids, Tensor& rows,
                        Tensor& X) {
  check_dtype(table, DType::BF16, "embed table");
  const int64_t vocab = table.dim(0), d = table.dim(1), n = static_cast<int64_t>(ids.size());
  check_shape(rows, Shape{n, d}, "embed rows");
  FD_CHECK(X.rows() == n && X.shape().row_numel() % d == 0, "embed: streams " + X.shape().str());
  for (int32_t id : ids) FD_CHECK(id >= 0 && id < vocab, "embed: token id out of range");
  if (n == 0) return;
  const int64_t hc = X.shape().row_numel() / d;
  cuda::DeviceGuard g(ctx_->device());
  Tensor dev_ids = ctx_->upload_span(ids, DType::I32);
  cuda::with_stream_type(X, "embed", [&](auto tag) {
    using S = cuda::StreamOf<decltype(tag)>;
    FD_LAUNCH(cuda::embed_kernel<S>, dim3(blocks_for(n * d, 256)), dim3(256), 0, ctx_->stream(),
              ptr<const uint16_t>(table), ptr<const int32_t>(dev_ids), n, d, hc, ptr<float>(rows),
              ptr<S>(X));
  });
}

}  // namespace flashdesk
