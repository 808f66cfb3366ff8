// Linear layers of the CUDA backend (linear.cuh describes the GEMV and GEMM paths).
#include <algorithm>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/gemv_device.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/linear.cuh"

namespace flashdesk {
namespace cuda {
namespace {

// grid (row blocks, K splits, groups): each warp computes kRowsPerWarp output rows of group
// blockIdx.z over the block's K split for NT activation rows (n <= NT; NT a compile-time count
// so the accumulators stay in registers).
template <WeightFormat F, int NT>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvParams p) {
  __shared__ __align__(16) float xs[kGemvRows * kSplitCols];
  constexpr int VW = Chunk<F>::VW;
  const int64_t g = blockIdx.z, split = blockIdx.y;
  const int64_t ks = split * p.k_split, cols = lmin(p.k - ks, p.k_split);
  stage_rows(p.x + g * p.k + ks, p.x_stride, p.n, cols, p.act_quant, xs, kSplitCols);
  __syncthreads();
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const int64_t o0 = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp * kRowsPerWarp;
  float acc[kRowsPerWarp][NT];
  FD_UNROLL
  for (int r = 0; r < kRowsPerWarp; ++r) {
    FD_UNROLL
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
  }
  for (int64_t c0 = lane * VW; c0 < cols; c0 += 32 * VW * kUnroll) {
    typename Chunk<F>::Raw raw[kRowsPerWarp][kUnroll] = {};
    FD_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
      FD_UNROLL
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + u * 32 * VW;
        if (o0 + r < p.out_g && c < cols) raw[r][u] = load_raw<F>(p, g * p.out_g + o0 + r, ks + c);
      }
    }
    FD_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
      FD_UNROLL
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + u * 32 * VW;
        if (o0 + r < p.out_g && c < cols) {
          float wv[VW];
          decode<F>(raw[r][u], wv);
          const float s = block_scale<F>(p, g * p.out_g + o0 + r, ks + c);
          FD_UNROLL
          for (int t = 0; t < NT; ++t) {
            if (t < p.n) {
              const float* xt = xs + t * kSplitCols + c;
              float chunk = 0.0f;
              FD_UNROLL
              for (int v = 0; v < VW; ++v) chunk += xt[v] * wv[v];
              acc[r][t] += chunk * s;
            }
          }
        }
      }
    }
  }
  FD_UNROLL
  for (int r = 0; r < kRowsPerWarp; ++r) {
    FD_UNROLL
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum(acc[r][t]);
      const int64_t o = o0 + r;
      if (lane == 0 && o < p.out_g && t < p.n) {
        float* dst = p.out + split * p.split_stride + t * p.out_stride + g * p.out_g + o;
        *dst = p.round ? round_bf16(v) : v;
      }
    }
  }
}

// y [n, cols] (row stride y_stride) = sum of the split partials in split order, rounded if asked.
__global__ void sum_splits_kernel(const float* partial, int64_t splits, int64_t split_stride,
                                  int64_t n, int64_t cols, int64_t stride, int round, float* y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * cols) return;
  const int64_t t = i / cols, o = i % cols;
  float v = 0.0f;
  for (int64_t s = 0; s < splits; ++s) v += partial[s * split_stride + t * stride + o];
  y[t * stride + o] = round ? round_bf16(v) : v;
}

// ---- GEMM path ----

// x [n, cols] -> BF16 bits (act_quant per 32 when asked, else the value rounded to BF16, exact
// for the BF16-valued activations the model feeds BF16 linears). One warp per 32 columns.
__global__ void prepare_bf16_kernel(const float* x, int64_t n, int64_t cols, int act_quant,
                                    uint16_t* out) {
  const int64_t blocks = (cols + 31) / 32;
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31u;
  if (i >= n * blocks) return;  // whole warps leave together
  const int64_t t = i / blocks, c = (i % blocks) * 32 + lane;
  float v = c < cols ? x[t * cols + c] : 0.0f;
  if (act_quant) {
    const float s = e8m0_to_f32(fp8_scale_code(warp_max(fabsf(v))));
    v = e4m3_to_f32(fp8_code(v, s)) * s;
  }
  if (c < cols) out[t * cols + c] = f32_to_bf16_bits(v);
}

// The F32 twin for F32 weights: act_quant'ed values in F32.
__global__ void act_quant_f32_kernel(const float* x, int64_t n, int64_t cols, float* out) {
  const int64_t blocks = (cols + 31) / 32;
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31u;
  if (i >= n * blocks) return;
  const int64_t t = i / blocks, c = (i % blocks) * 32 + lane;
  float v = c < cols ? x[t * cols + c] : 0.0f;
  const float s = e8m0_to_f32(fp8_scale_code(warp_max(fabsf(v))));
  v = e4m3_to_f32(fp8_code(v, s)) * s;
  if (c < cols) out[t * cols + c] = v;
}

// A quantised weight [rows, k] as BF16 bits (codes times scales: exact).
__global__ void dequantize_weight_kernel(const uint8_t* w, const uint8_t* scale, int64_t scale_cols,
                                         int64_t rows, int64_t k, int fp4, uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * k) return;
  const int64_t r = i / k, c = i % k;
  float v;
  if (fp4) {
    const uint8_t byte = w[r * (k / 2) + c / 2];
    v = e2m1_to_f32((c & 1) ? (byte >> 4) : (byte & 0xFu)) *
        e8m0_to_f32(scale[r * scale_cols + c / 32]);
  } else {
    v = e4m3_to_f32(w[i]) * e8m0_to_f32(scale[(r / 32) * scale_cols + c / 32]);
  }
  out[i] = f32_to_bf16_bits(v);
}

__global__ void round_rows_kernel(float* y, int64_t n, int64_t cols, int64_t stride) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * cols) return;
  float* p = y + (i / cols) * stride + i % cols;
  *p = round_bf16(*p);
}

template <WeightFormat F>
void launch_gemv_rows(DeviceContext& ctx, int64_t n, dim3 grid, const GemvParams& p) {
  void (*k)(GemvParams) = n <= 1   ? &gemv_kernel<F, 1>
                          : n <= 2 ? &gemv_kernel<F, 2>
                          : n <= 4 ? &gemv_kernel<F, 4>
                                   : &gemv_kernel<F, 8>;
  FD_LAUNCH(k, grid, dim3(kGemvThreads), 0, ctx.stream(), p);
}

void launch_gemv(DeviceContext& ctx, WeightFormat f, int64_t n, dim3 grid, const GemvParams& p) {
  switch (f) {
    case WeightFormat::Fp8Block:
      return launch_gemv_rows<WeightFormat::Fp8Block>(ctx, n, grid, p);
    case WeightFormat::Fp4Row:
      return launch_gemv_rows<WeightFormat::Fp4Row>(ctx, n, grid, p);
    case WeightFormat::Bf16:
      return launch_gemv_rows<WeightFormat::Bf16>(ctx, n, grid, p);
    case WeightFormat::F32:
      return launch_gemv_rows<WeightFormat::F32>(ctx, n, grid, p);
  }
}

// Columns per K split: whole 256-column chunks, small enough that rows x splits fill the GPU
// about four times over, at most what a block stages.
int64_t split_columns(const DeviceContext& ctx, int64_t row_blocks, int64_t k) {
  const int64_t target = 4 * static_cast<int64_t>(ctx.multiprocessors());
  const int64_t want_splits = std::max<int64_t>(1, (target + row_blocks - 1) / row_blocks);
  int64_t cols = (k + want_splits - 1) / want_splits;
  cols = (cols + 255) / 256 * 256;
  return std::clamp<int64_t>(cols, 256, kSplitCols);
}

}  // namespace

void gemv(DeviceContext& ctx, const GemvJob& job) {
  const LinearWeight& w = *job.w;
  FD_CHECK(job.n >= 1 && job.n <= kGemvTokens, w.name + ": GEMV takes 1..8 rows");
  GemvParams p{};
  p.x = job.x;
  p.x_stride = job.x_stride;
  p.n = job.n;
  p.w = w.data.bytes();
  p.scale = w.scale.defined() ? w.scale.bytes() : nullptr;
  p.scale_cols = w.scale.defined() ? w.scale.dim(1) : 0;
  p.out_g = job.out_g;
  p.k = job.k;
  p.act_quant = job.act_quant;
  p.vec_ok = job.k % 4 == 0;
  const int64_t row_blocks = (job.out_g + kRowsPerBlock - 1) / kRowsPerBlock;
  p.k_split = split_columns(ctx, row_blocks * job.groups, job.k);
  const int64_t splits = (job.k + p.k_split - 1) / p.k_split;
  const int64_t out_total = job.groups * job.out_g;
  Tensor partial;
  if (splits > 1) {
    partial = ctx.scratch(DType::F32, Shape{splits, job.n, out_total});
    p.out = ptr<float>(partial);
    p.out_stride = out_total;
    p.split_stride = job.n * out_total;
    p.round = 0;
  } else {
    p.out = job.y;
    p.out_stride = job.y_stride;
    p.round = job.round_bf16;
  }
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(splits),
                  static_cast<unsigned>(job.groups));
  launch_gemv(ctx, w.format, job.n, grid, p);
  if (splits > 1) {
    FD_CHECK(job.y_stride == out_total, w.name + ": split GEMV output must be dense");
    FD_LAUNCH(sum_splits_kernel, dim3(blocks_for(job.n * out_total, 256)), dim3(256), 0,
              ctx.stream(), ptr<const float>(partial), splits, job.n * out_total, job.n, out_total,
              out_total, static_cast<int>(job.round_bf16), job.y);
  }
}

void gemm(DeviceContext& ctx, const GemvJob& job) {
  const LinearWeight& w = *job.w;
  const int64_t n = job.n, cols = job.x_stride, out_total = job.groups * job.out_g;
  FD_CHECK(cols == job.groups * job.k, w.name + ": GEMM input must be dense");
  GemmArgs a;
  a.rows = n;
  a.cols = job.out_g;
  a.k = job.k;
  a.ldx = cols;
  a.ldw = job.k;
  a.y = job.y;
  a.ldy = job.y_stride;
  a.batch = job.groups;
  a.stride_x = job.k;
  a.stride_w = job.out_g * job.k;
  a.stride_y = job.out_g;
  Tensor xin, win;
  const unsigned warps_blocks = blocks_for(n * ((cols + 31) / 32) * 32, 256);
  if (w.format == WeightFormat::F32) {
    a.in = GemmInput::F32;
    a.w = w.data.bytes();
    a.x = job.x;
    if (job.act_quant) {
      xin = ctx.scratch(DType::F32, Shape{n, cols});
      FD_LAUNCH(act_quant_f32_kernel, dim3(warps_blocks), dim3(256), 0, ctx.stream(), job.x, n,
                cols, ptr<float>(xin));
      a.x = xin.bytes();
    }
  } else {
    a.in = GemmInput::Bf16;
    xin = ctx.scratch(DType::BF16, Shape{n, cols});
    FD_LAUNCH(prepare_bf16_kernel, dim3(warps_blocks), dim3(256), 0, ctx.stream(), job.x, n, cols,
              static_cast<int>(job.act_quant), ptr<uint16_t>(xin));
    a.x = xin.bytes();
    if (w.format == WeightFormat::Bf16) {
      a.w = w.data.bytes();
    } else {
      win = ctx.scratch(DType::BF16, Shape{out_total, job.k});
      FD_LAUNCH(dequantize_weight_kernel, dim3(blocks_for(out_total * job.k, 256)), dim3(256), 0,
                ctx.stream(), ptr<const uint8_t>(w.data), ptr<const uint8_t>(w.scale),
                w.scale.dim(1), out_total, job.k,
                static_cast<int>(w.format == WeightFormat::Fp4Row), ptr<uint16_t>(win));
      a.w = win.bytes();
    }
  }
  ctx.blas().gemm_nt(a);
  count_kernel_launch();
  if (job.round_bf16)
    FD_LAUNCH(round_rows_kernel, dim3(blocks_for(n * out_total, 256)), dim3(256), 0, ctx.stream(),
              job.y, n, out_total, job.y_stride);
}

void run_linear(DeviceContext& ctx, const float* x, int64_t n, const LinearWeight& w,
                LinearMode mode, float* y) {
  if (n == 0) return;
  GemvJob job;
  job.x = x;
  job.x_stride = w.in;
  job.n = n;
  job.w = &w;
  job.out_g = w.out;
  job.k = w.in;
  job.act_quant = mode.input == LinearInput::ActQuantFp8;
  job.y = y;
  job.y_stride = w.out;
  job.round_bf16 = mode.output == LinearOutput::Bf16;
  if (n <= kGemvTokens)
    gemv(ctx, job);
  else
    gemm(ctx, job);
}

}  // namespace cuda

using cuda::ptr;

void CudaBackend::linear(const Tensor& x, const LinearWeight& w, LinearMode mode, Tensor& y) {
  const int64_t n = x.rows(), k = w.in, out = w.out;
  check_dtype(x, DType::F32, "linear x");
  FD_CHECK(x.shape().row_numel() == k,
           w.name + ": input " + x.shape().str() + " but K = " + std::to_string(k));
  FD_CHECK(y.rows() == n && y.shape().row_numel() == out, w.name + ": output " + y.shape().str());
  FD_CHECK(x.bytes() != y.bytes(), w.name + ": linear output must not alias its input");
  cuda::DeviceGuard g(ctx_->device());
  cuda::run_linear(*ctx_, ptr<const float>(x), n, w, mode, ptr<float>(y));
}

void CudaBackend::grouped_linear(const Tensor& x, const LinearWeight& w, int64_t groups,
                                 Tensor& y) {
  const int64_t n = x.rows(), in_g = w.in, out = w.out;
  FD_CHECK(groups > 0 && out % groups == 0, w.name + ": rows not divisible into groups");
  const int64_t out_g = out / groups, x_cols = groups * in_g;
  FD_CHECK(x.shape().row_numel() == x_cols, w.name + ": grouped input " + x.shape().str());
  FD_CHECK(y.rows() == n && y.shape().row_numel() == out, w.name + ": grouped output");
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  cuda::GemvJob job;
  job.x = ptr<const float>(x);
  job.x_stride = x_cols;
  job.n = n;
  job.w = &w;
  job.out_g = out_g;
  job.groups = groups;
  job.k = in_g;
  job.act_quant = false;
  job.y = ptr<float>(y);
  job.y_stride = out;
  job.round_bf16 = true;
  if (n <= cuda::kGemvTokens)
    cuda::gemv(*ctx_, job);
  else
    cuda::gemm(*ctx_, job);
}

}  // namespace flashdesk
