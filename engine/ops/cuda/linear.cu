// Linear layers of the CUDA backend (linear.cuh describes the GEMV and GEMM paths).
#include <algorithm>

#include "engine/ops/cuda/bf16_codes.cuh"
#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/dequant.cuh"
#include "engine/ops/cuda/gemv_device.cuh"
#include "engine/ops/cuda/gemv_tc.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/linear.cuh"
#include "engine/ops/cuda/no_padding.h"

namespace flashdesk {
namespace cuda {
namespace {

// The GEMV kernels' launch: one job's pointers and sizes (group g of a grouped linear reads x
// columns [g*k, (g+1)*k) and weight rows [g*out_g, (g+1)*out_g)).
FD_NO_PADDING_BEGIN
struct GemvParams {
  const float* x;
  int64_t x_stride, n;
  const uint8_t* w;
  const uint8_t* scale;
  int64_t scale_cols, out_g, k;
  int64_t k_split, xs_stride;  // columns per K split (whole warp steps); staged row stride
  int64_t row_tiles;           // blocks of kGemvWarps * WarpShape::R rows of a group
  int act_quant;
  int round;
  float* out;  // y, or the split partials [splits][n][out_stride]
  int64_t out_stride, split_stride;
  // K splits: the last block of a row tile's splits to finish sums the tile's partials into y
  // (split order, rounded if final_round), counting arrivals in tile_done [groups][row_tiles].
  int64_t splits;
  float* y;
  int64_t y_stride;
  int final_round;
  int early_weights;  // the first tile's weight loads before the wait (gemv_weights_before_wait)
  unsigned* tile_done;
};
FD_NO_PADDING_END

// Rows per warp (R) and chunks in flight per lane per row (U) for NT activation rows: the most that
// fit 128 registers without spilling (two blocks per multiprocessor; ptxas -v on sm_80 and
// sm_90). R * U sixteen-byte loads are in flight per lane: 8 at one activation row; fewer where the
// coded formats' per-chunk sums double the accumulators and FP4's decoding needs registers too,
// at 2 to 8 activation rows, where the FP32 products rather than the loads bound the time.
template <WeightFormat F, int NT>
struct WarpShape {
  // By format (BF16 / F32, FP8, FP4), then NT (1, 2, 4, 8).
  static constexpr int kRows[3][4] = {{8, 8, 4, 4}, {8, 4, 2, 2}, {8, 2, 2, 2}};
  static constexpr int kDepth[3][4] = {{1, 1, 2, 1}, {1, 2, 2, 2}, {1, 2, 2, 2}};
  static constexpr int kKind = F == WeightFormat::Fp8Block ? 1 : F == WeightFormat::Fp4Row ? 2 : 0;
  static constexpr int kLog = NT == 1 ? 0 : NT == 2 ? 1 : NT == 4 ? 2 : 3;
  static constexpr int R = kRows[kKind][kLog], U = kDepth[kKind][kLog];
};
constexpr int64_t kStageBytes = 48 << 10;  // dynamic shared memory without an opt-in

template <WeightFormat F, int R>
__device__ WarpRows<R> warp_rows(const GemvParams& p, int64_t g, int64_t o0) {
  WarpRows<R> w;
  FD_UNROLL
  for (int r = 0; r < R; ++r) {
    const int64_t row = g * p.out_g + o0 + r;
    const bool valid = o0 + r < p.out_g;
    const int64_t scale_row = F == WeightFormat::Fp8Block ? row / 32 : row;
    w.row[r] = valid ? p.w + row * Chunk<F>::bytes(p.k) : nullptr;
    w.scale[r] = valid && p.scale ? p.scale + scale_row * p.scale_cols : nullptr;
  }
  mark_whole(w);
  return w;
}

// Lane L holds the warp's total for (row, activation row) number L / (32 / (R * NT)).
template <int R, int NT>
__device__ void write_rows(const GemvParams& p, float* acc, int64_t g, int64_t o0, int64_t split) {
  constexpr int G = 32 / (R * NT);
  const float v = warp_sum_many<R * NT>(acc);
  const unsigned lane = threadIdx.x & 31u;
  const int64_t r = (lane / G) / NT, t = (lane / G) % NT, o = o0 + r;
  if (lane % G != 0 || o >= p.out_g || t >= p.n) return;
  p.out[split * p.split_stride + t * p.out_stride + g * p.out_g + o] = p.round ? round_bf16(v) : v;
}

// The split sums of the row tiles this block streamed (tiles blockIdx.x, + gridDim.x, ...): for
// each, the block that brings its arrival count to p.splits sums the splits' partials in split
// order (the FP32 sums of the former separate sum kernel, to the bit) and sets the count back to
// zero. A separate sum kernel cost a launch of 3-4 µs per split linear, 8 a decode layer.
template <int R>
__device__ void sum_split_tiles(const GemvParams& p, int64_t g) {
  constexpr int64_t kTileRows = kGemvWarps * R;
  for (int64_t tile = blockIdx.x; tile < p.row_tiles; tile += gridDim.x) {
    __threadfence();  // this thread's partials visible to the block that sums them
    __syncthreads();  // ... every thread's, before the block counts itself in
    bool mine = false;
    if (threadIdx.x == 0) {
      unsigned* count = p.tile_done + g * p.row_tiles + tile;
      mine = atomicAdd(count, 1u) == static_cast<unsigned>(p.splits - 1);
      if (mine) *count = 0;
    }
    // A barrier that also hands thread 0's answer to the block: no static shared memory, which
    // would push a block staging the full 48 KiB over the limit.
    if (!__syncthreads_or(mine)) continue;
    __threadfence();
    const int64_t o0 = tile * kTileRows, rows = lmin(kTileRows, p.out_g - o0);
    for (int64_t i = threadIdx.x; i < rows * p.n; i += blockDim.x) {
      const int64_t t = i / rows, o = g * p.out_g + o0 + i % rows;
      const float* src = p.out + t * p.out_stride + o;
      float v = 0.0f;
      for (int64_t s = 0; s < p.splits; ++s) v += __ldcg(src + s * p.split_stride);
      p.y[t * p.y_stride + o] = p.final_round ? round_bf16(v) : v;
    }
  }
}

// grid (row blocks, K splits, groups): each block stages the activation rows of its K split of
// group blockIdx.z once, then streams row tiles blockIdx.x, + gridDim.x, ... of kGemvWarps * R
// rows against them, each warp R rows for n <= NT activation rows (NT a compile-time count so the
// accumulators stay in registers). kScaled: FP8 / FP4 codes against act_quant'ed activations
// (gemv_device.cuh).
// kValues: FP8 codes decoded by the hardware's conversion (gemv_device.cuh e4m3x4_values).
template <WeightFormat F, int NT, bool kScaled, bool kValues>
__global__ void __launch_bounds__(kGemvThreads, kGemvBlocksPerSm) gemv_kernel(GemvParams p) {
  constexpr int R = WarpShape<F, NT>::R, U = WarpShape<F, NT>::U;
  FD_DYNAMIC_SMEM(float, xs);
  // The first tile's weight loads go out before the wait for the kernel that wrote x (weights
  // are never written): they overlap its end (cuda_compat.cuh).
  fd_allow_dependents();
  if (!p.early_weights) fd_wait_prior_grid();
  const int64_t g = blockIdx.z, split = blockIdx.y;
  const int64_t ks = split * p.k_split, cols = lmin(p.k - ks, p.k_split);
  const int64_t warp_row = (threadIdx.x >> 5) * R;
  const auto rows_of = [&](int64_t tile) {
    return warp_rows<F, R>(p, g, tile * kGemvWarps * R + warp_row);
  };
  const auto stage = [&] {
    fd_wait_prior_grid();
    stage_rows<Chunk<F>::VW>(p.x + g * p.k + ks, p.x_stride, p.n, cols, p.act_quant,
                             kScaled ? kStageFactor : 1.0f, xs, p.xs_stride);
  };
  const auto emit = [&](int64_t tile, float* acc) {
    write_rows<R, NT>(p, acc, g, tile * kGemvWarps * R + warp_row, split);
  };
  // One row: the next tile's loads go out before a tile's sums are emitted (H200, one row: wq_b
  // 23.9 -> 22.5 µs, wo_b 24.7 -> 24.0; docs/cuda-backend.md).
  if constexpr (NT == 1)
    stream_tiles_one_row<F, R, U, kScaled, kValues>(p.row_tiles, rows_of, stage, emit, ks, p.k,
                                                    cols, xs);
  else
    stream_tiles<F, R, NT, U, kScaled, kValues>(p.row_tiles, rows_of, stage, emit, ks, p.k, cols,
                                                xs, p.xs_stride, p.n);
  if (p.splits > 1) sum_split_tiles<R>(p, g);
}

// ---- GEMM path ----

// act_quant's value of each of v[0, N) at the block scale s (a power of two): e4m3(clamp(v / s)) *
// s (docs/numerics.md "Linear layers"), by e4m3_round_values (device_numeric.cuh: the hardware's
// conversions on sm_89+; about 40 instructions a value through fp8_code and e4m3_to_f32 made the
// prefill's staging kernel issue-bound). The same bits either way (DecodeAndActQuantAreExact, on
// both the GEMV's and the GEMM's staging).
template <int N>
__device__ __forceinline__ void act_quant_values(float (&v)[N], float s) {
  e4m3_round_values(v, 1.0f / s);
  FD_UNROLL
  for (int e = 0; e < N; ++e) v[e] *= s;
}

// x [n, cols] -> BF16 bits (act_quant per 32 when asked, else the value rounded to BF16, exact
// for the BF16-valued activations the model feeds BF16 linears). One warp per 32 columns.
// A lane takes four consecutive columns of a row (8 lanes a 32-column act_quant block, whose
// maximum is theirs) and the rows gridDim.y apart: one element a thread, with a 64-bit division
// to find its row, ran at 0.8 TB/s on an 8K-token prefill's 1 GB activations. `vec`: cols a
// multiple of 4 and x, out aligned for 16- and 8-byte accesses.
__global__ void prepare_bf16_kernel(const float* x, int64_t n, int64_t cols, int act_quant,
                                    bool vec, uint16_t* out) {
  FD_GRID_PROLOGUE();
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {  // uniform: every lane stays
    const float* src = x + t * cols + c;
    float v[4];
    if (vec && c < cols) {
      const float4 q = *reinterpret_cast<const float4*>(src);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
      FD_UNROLL
      for (int e = 0; e < 4; ++e) v[e] = c + e < cols ? src[e] : 0.0f;
    }
    if (act_quant) {
      float m = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
      FD_UNROLL
      for (int o = 1; o < 8; o <<= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
      const float s = e8m0_to_f32(fp8_scale_code(m));
      act_quant_values(v, s);
    }
    uint16_t* dst = out + t * cols + c;
    if (vec && c < cols) {
      // Every value is a BF16 value or rounds as f32_to_bf16_bits does (no NaN: act_quant clamps).
      *reinterpret_cast<uint2*>(dst) = uint2{bf16x2_rn(v[0], v[1]), bf16x2_rn(v[2], v[3])};
    } else {
      FD_UNROLL
      for (int e = 0; e < 4; ++e)
        if (c + e < cols) dst[e] = f32_to_bf16_bits(v[e]);
    }
  }
}

// The F32 twin for F32 weights: act_quant'ed values in F32.
__global__ void act_quant_f32_kernel(const float* x, int64_t n, int64_t cols, float* out) {
  FD_GRID_PROLOGUE();
  const int64_t blocks = (cols + 31) / 32;
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31u;
  if (i >= n * blocks) return;
  const int64_t t = i / blocks, c = (i % blocks) * 32 + lane;
  float v = c < cols ? x[t * cols + c] : 0.0f;
  const float s = e8m0_to_f32(fp8_scale_code(warp_max(fabsf(v))));
  float one[1] = {v};
  act_quant_values(one, s);
  if (c < cols) out[t * cols + c] = one[0];
}

// Four columns a thread, rows gridDim.y apart (as prepare_bf16_kernel: one element a thread with
// a 64-bit division ran at 0.8 TB/s). `vec`: cols and stride multiples of 4, y 16-byte aligned.
__global__ void round_rows_kernel(float* y, int64_t n, int64_t cols, int64_t stride, bool vec) {
  FD_GRID_PROLOGUE();
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (c >= cols) return;
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    float* p = y + t * stride + c;
    if (vec) {
      float4 q = *reinterpret_cast<float4*>(p);
      q.x = round_bf16(q.x), q.y = round_bf16(q.y), q.z = round_bf16(q.z), q.w = round_bf16(q.w);
      *reinterpret_cast<float4*>(p) = q;
    } else {
      for (int64_t e = 0; e < 4 && c + e < cols; ++e) p[e] = round_bf16(p[e]);
    }
  }
}

// y rows [n, cols] (row stride `stride`) = the BF16 rows b [n, cols] (dense) as F32, four columns a
// thread, rows gridDim.y apart. `vec`: cols and stride multiples of 4, y 16- and b 8-byte aligned.
__global__ void widen_rows_kernel(const uint16_t* b, int64_t n, int64_t cols, float* y,
                                  int64_t stride, bool vec) {
  FD_GRID_PROLOGUE();
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (c >= cols) return;
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    const uint16_t* src = b + t * cols + c;
    float* dst = y + t * stride + c;
    if (vec) {
      const uint2 h = *reinterpret_cast<const uint2*>(src);
      *reinterpret_cast<float4*>(dst) =
          float4{__uint_as_float(h.x << 16), __uint_as_float(h.x & 0xFFFF0000u),
                 __uint_as_float(h.y << 16), __uint_as_float(h.y & 0xFFFF0000u)};
    } else {
      for (int64_t e = 0; e < 4 && c + e < cols; ++e) dst[e] = bf16_bits_to_f32(src[e]);
    }
  }
}

// How a job is cut: row tiles of kGemvWarps * WarpShape::R rows; the K dimension split into whole
// warp steps when the tiles of all groups would give less than a wave of resident blocks, or when
// a split's activation rows would not fit the staging memory; then about a wave of blocks, each
// looping over an equal share of its split's tiles.
struct GemvGrid {
  int64_t row_tiles, row_blocks, splits, k_split;
};

GemvGrid gemv_grid(const DeviceContext& ctx, int64_t rows_per_tile, int64_t step_cols,
                   const GemvJob& job) {
  GemvGrid gr{};
  gr.row_tiles = (job.out_g + rows_per_tile - 1) / rows_per_tile;
  const int64_t steps = (job.k + step_cols - 1) / step_cols;
  const int64_t max_steps = std::max<int64_t>(1, kStageBytes / (4 * job.n * step_cols));
  const int64_t capacity = kGemvBlocksPerSm * static_cast<int64_t>(ctx.multiprocessors());
  const int64_t wanted = std::max<int64_t>(1, capacity / (gr.row_tiles * job.groups));
  const int64_t splits = std::max((steps + max_steps - 1) / max_steps, std::min(wanted, steps));
  const int64_t steps_per_split = (steps + splits - 1) / splits;
  gr.k_split = steps_per_split * step_cols;
  gr.splits = (steps + steps_per_split - 1) / steps_per_split;
  gr.row_blocks = tile_blocks(gr.row_tiles, gr.splits * job.groups, capacity);
  return gr;
}

template <WeightFormat F, int NT, bool kScaled, bool kValues = false>
void run_gemv(DeviceContext& ctx, const GemvJob& job, GemvParams p) {
  const GemvGrid gr = gemv_grid(ctx, kGemvWarps * WarpShape<F, NT>::R, Chunk<F>::W, job);
  p.k_split = gr.k_split;
  p.xs_stride = gr.k_split;
  p.row_tiles = gr.row_tiles;
  const int64_t out_total = job.groups * job.out_g;
  Tensor partial;
  if (gr.splits > 1) {
    partial = ctx.scratch(DType::F32, Shape{gr.splits, job.n, out_total});
    p.out = ptr<float>(partial);
    p.out_stride = out_total;
    p.split_stride = job.n * out_total;
    p.round = 0;
    p.splits = gr.splits;
    p.y = job.y;
    p.y_stride = job.y_stride;
    p.final_round = job.round_bf16;
    p.tile_done = ctx.arrival_counters(job.groups * gr.row_tiles);
  } else {
    p.out = job.y;
    p.out_stride = job.y_stride;
    p.round = job.round_bf16;
  }
  const dim3 grid(static_cast<unsigned>(gr.row_blocks), static_cast<unsigned>(gr.splits),
                  static_cast<unsigned>(job.groups));
  const size_t smem = static_cast<size_t>(job.n * gr.k_split) * sizeof(float);
  FD_LAUNCH((gemv_kernel<F, NT, kScaled, kValues>), grid, dim3(kGemvThreads), smem, ctx.stream(),
            p);
}

template <WeightFormat F, bool kScaled>
void run_gemv_rows(DeviceContext& ctx, const GemvJob& job, const GemvParams& p) {
  // FP8: the codes through the hardware's conversion where the device has it (e4m3x4_values; H100,
  // one act_quant'ed row: wq_b 24.1 -> 23.0 µs, wo_b 26.8 -> 25.7; wo_a 22.4 -> 21.2, at 4 rows
  // 37.5 -> 34.5; docs/cuda-backend.md), by default at every row count (Fp8Conversion::All).
  const auto by_rows = [&]<bool kValues>() {
    if (job.n <= 1) return run_gemv<F, 1, kScaled, kValues>(ctx, job, p);
    if (job.n <= 2) return run_gemv<F, 2, kScaled, kValues>(ctx, job, p);
    if (job.n <= 4) return run_gemv<F, 4, kScaled, kValues>(ctx, job, p);
    run_gemv<F, 8, kScaled, kValues>(ctx, job, p);
  };
  if constexpr (F == WeightFormat::Fp8Block) {
    const Fp8Conversion c = ctx.fp8_conversion();
    if (c == Fp8Conversion::All || (c == Fp8Conversion::OneRow && kScaled && job.n <= 1))
      return by_rows.template operator()<true>();
  }
  by_rows.template operator()<false>();
}

// Coded weights against act_quant'ed activations take the scaled decoders (gemv_device.cuh).
template <WeightFormat F>
void run_gemv_format(DeviceContext& ctx, const GemvJob& job, const GemvParams& p) {
  if constexpr (Chunk<F>::kCoded) {
    if (job.act_quant) return run_gemv_rows<F, true>(ctx, job, p);
  }
  run_gemv_rows<F, false>(ctx, job, p);
}

}  // namespace

void gemv(DeviceContext& ctx, const GemvJob& job) {
  const LinearWeight& w = *job.w;
  FD_CHECK(job.n >= 1 && job.n <= kGemvTokens, w.name + ": GEMV takes 1..8 rows");
  FD_CHECK(w.format != WeightFormat::Fp4Row || job.k % 32 == 0,
           w.name + ": FP4 rows must be whole 32-column blocks");
  // The tensor cores from a few rows on: their cost hardly grows with the rows, but at one row
  // (and at two for the small matrices) the CUDA-core GEMV, without the activations' separate
  // quantisation launch, is faster (H200: wo_b 26.3 against 37.5 µs at one row, 97.0 against
  // 40.9 at eight; wq_a 12.0 against 14.7 at two; docs/cuda-backend.md).
  // BF16 linears (the grouped wo_a) from five rows: H100, wo_a 34.6 µs on the CUDA cores against
  // 38.0 on the tensor cores at four rows, 72.1 against 42.2 at eight.
  const bool few_rows = job.n == 1 || (job.n == 2 && job.out_g * job.k < (int64_t{16} << 20)) ||
                        (!job.act_quant && job.n <= 4);
  using K = GemvKernels;
  const K kernels = ctx.gemv_kernels();
  if ((kernels == K::TensorCores || (kernels == K::Auto && !few_rows)) && gemv_tc_fits(job))
    return gemv_tc(ctx, job);
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
  p.early_weights = gemv_weights_before_wait() ? 1 : 0;
  switch (w.format) {
    case WeightFormat::Fp8Block:
      return run_gemv_format<WeightFormat::Fp8Block>(ctx, job, p);
    case WeightFormat::Fp4Row:
      return run_gemv_format<WeightFormat::Fp4Row>(ctx, job, p);
    case WeightFormat::Bf16:
      return run_gemv_format<WeightFormat::Bf16>(ctx, job, p);
    case WeightFormat::F32:
      return run_gemv_format<WeightFormat::F32>(ctx, job, p);
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
    FD_CHECK(job.x != nullptr,
             w.name + ": F32 weights multiply the F32 rows, not staged BF16 ones");
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
    if (job.x_bf16 != nullptr) {
      a.x = job.x_bf16;
    } else {
      xin = ctx.scratch(DType::BF16, Shape{n, cols});
      FD_LAUNCH(prepare_bf16_kernel, four_column_grid(n, cols), dim3(256), 0, ctx.stream(), job.x,
                n, cols, static_cast<int>(job.act_quant), cols % 4 == 0 && aligned16(job.x),
                ptr<uint16_t>(xin));
      a.x = xin.bytes();
    }
    if (w.format == WeightFormat::Bf16) {
      a.w = w.data.bytes();
    } else {
      win = ctx.scratch(DType::BF16, Shape{out_total, job.k});
      dequantize_to_bf16(ctx, w, out_total, job.k, ptr<uint16_t>(win));
      a.w = win.bytes();
    }
  }
  // A BF16 output from BF16 operands: cuBLAS rounds its FP32 sums to BF16 (nearest even, as
  // round_bf16) into a dense scratch, widened into y: 8 bytes of traffic an output value against
  // 12 for F32 sums rounded in place. H200, an 8K-token window-only layer (Nsight Compute): the
  // widening 0.71 ms against the rounding's 0.89, wq_b's GEMM 508 against 549 us.
  Tensor ybf;
  if (job.round_bf16 && a.in == GemmInput::Bf16) {
    ybf = ctx.scratch(DType::BF16, Shape{n, out_total});
    a.out = GemmOutput::Bf16;
    a.y = ybf.bytes();
    a.ldy = out_total;
  }
  ctx.blas().gemm_nt(a);
  count_kernel_launch("cublas gemm_nt");
  if (ybf.defined())
    FD_LAUNCH(
        widen_rows_kernel, four_column_grid(n, out_total), dim3(256), 0, ctx.stream(),
        ptr<const uint16_t>(ybf), n, out_total, job.y, job.y_stride,
        out_total % 4 == 0 && job.y_stride % 4 == 0 && aligned16(job.y) && aligned16(ybf.bytes()));
  else if (job.round_bf16)
    FD_LAUNCH(round_rows_kernel, four_column_grid(n, out_total), dim3(256), 0, ctx.stream(), job.y,
              n, out_total, job.y_stride,
              out_total % 4 == 0 && job.y_stride % 4 == 0 && aligned16(job.y));
}

void act_quant_to_bf16(DeviceContext& ctx, const float* x, int64_t n, int64_t cols, uint16_t* out) {
  if (n == 0) return;
  FD_LAUNCH(prepare_bf16_kernel, four_column_grid(n, cols), dim3(256), 0, ctx.stream(), x, n, cols,
            1, cols % 4 == 0 && aligned16(x) && aligned16(out), out);
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
