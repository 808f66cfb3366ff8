// Manifold-constrained hyper-connections on the CUDA backend (MODEL-REFERENCE §4.1): the mixes of
// every row in one kernel (the 24 dot products over hc*D split across blocks, the last block of a
// row tile summing the splits in order and running the Sinkhorn normalisation), and the collapse
// and expansion of the streams with the reference's exact rounding order.
#include <algorithm>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/gemv_device.cuh"
#include "engine/ops/cuda/hc_mix.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/stream_io.cuh"

namespace flashdesk {
namespace cuda {
namespace {

// A thread reads 4 consecutive elements of a row and of each of the 24 fn rows with 16-byte
// loads, all 25 in flight at once: the 2 MB of fn (V4.1: 24 x 4 x 5120 F32) in one round trip
// over 40 blocks. One element a thread a load, in 256-thread blocks, took 13.8 µs a decode mix.
constexpr int kMixThreads = 128;
constexpr int kMixVec = 4;
// Rows per tile: 4 for a few rows (decode: a warp each for the Sinkhorn); 32 for a prefill, whose
// blocks then read the fn elements once per 32 rows (at 4, an 8K-token prefill's blocks read 4 GB
// of fn from L2: 1.8 ms a call).
constexpr int kFewRows = 4;
constexpr int kManyRows = 32;
constexpr int64_t kManyRowsFrom = 256;  // rows of a call that take the 32-row tiles
constexpr int64_t kSplitElems = kMixVec * kMixThreads;

// The 25 sums of one row tile over one split of the flat dimension, written to
// partial[row][split][kSums]; the last block of the tile to finish combines every split.
template <class S>
__global__ void __launch_bounds__(kMixThreads)
    hc_mix_kernel(const S* X, const float* fn, const float* base, const float* scale, MixShape s,
                  float* partial, unsigned* done, float* pre, float* post, float* comb) {
  __shared__ float warp_sums[kSums][kMixThreads / 32];
  __shared__ float row_sums[kManyRows][kSums];
  __shared__ unsigned is_last;
  const int64_t split = blockIdx.x, tile = blockIdx.y;
  const int64_t k0 = split * kSplitElems,
                k1 = k0 + kSplitElems < s.flat ? k0 + kSplitElems : s.flat;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const int64_t k = k0 + threadIdx.x * kMixVec;
  const bool whole = k + kMixVec <= k1 && s.flat % kMixVec == 0;  // rows of whole float4s
  // The thread's fn elements (weights, never written) are loaded once for every row of the tile,
  // before the wait for the kernel that wrote X: their DRAM round trip overlaps its end.
  fd_allow_dependents();
  float4 f[kMaxMix];
  FD_UNROLL
  for (int j = 0; j < kMaxMix; ++j)
    f[j] = whole && j < s.n_mix ? *reinterpret_cast<const float4*>(fn + j * s.flat + k)
                                : float4{0.0f, 0.0f, 0.0f, 0.0f};
  fd_wait_prior_grid();
  for (int r = 0; r < s.tile_rows; ++r) {
    const int64_t row = tile * s.tile_rows + r;
    if (row >= s.n) break;  // uniform over the block
    // Fully unrolled over the 25 sums, so acc stays in registers and the 24 fn loads of an
    // element are in flight together (a run-time index sent acc to local memory: 61 µs a call).
    // 32 sums (25 used) so that warp_sum_many hands lane j the warp's total of sum j.
    float acc[32];
    FD_UNROLL
    for (int j = 0; j < 32; ++j) acc[j] = 0.0f;
    const S* xr = X + row * s.flat;
    if (whole) {
      const float4 x = load_stream4(xr + k);
      acc[kMaxMix] = x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
      FD_UNROLL
      for (int j = 0; j < kMaxMix; ++j)
        acc[j] = x.x * f[j].x + x.y * f[j].y + x.z * f[j].z + x.w * f[j].w;
    } else {
      for (int64_t e = k; e < k + kMixVec && e < k1; ++e) {
        const float x = load_stream(xr + e);
        acc[kMaxMix] += x * x;
        FD_UNROLL
        for (int j = 0; j < kMaxMix; ++j)
          if (j < s.n_mix) acc[j] += x * fn[j * s.flat + e];
      }
    }
    const float warp_total = warp_sum_many<32>(acc);
    if (lane < kSums) warp_sums[lane][warp] = warp_total;
    __syncthreads();
    if (threadIdx.x < kSums) {
      float v = 0.0f;
      for (unsigned w = 0; w < blockDim.x / 32; ++w) v += warp_sums[threadIdx.x][w];
      partial[(row * s.splits + split) * kSums + threadIdx.x] = v;
    }
    __syncthreads();
  }
  finish_mix_tile(s, tile, partial, done, base, scale, row_sums, &is_last, pre, post, comb);
}

// Four consecutive elements of a row a thread, rows gridDim.y apart: one element a thread, with
// 64-bit divisions for its row, ran at 0.45-0.8 TB/s on an 8K-token prefill. `vec`: d a multiple
// of 4 and the tensors 16-byte aligned.
struct Quad {
  float v[4];
};
template <class S>
__device__ __forceinline__ Quad load_quad(const S* p, int64_t left, bool vec) {
  Quad q;
  if (vec) {
    const float4 f = load_stream4(p);
    q.v[0] = f.x, q.v[1] = f.y, q.v[2] = f.z, q.v[3] = f.w;
  } else {
    FD_UNROLL
    for (int e = 0; e < 4; ++e) q.v[e] = e < left ? load_stream(p + e) : 0.0f;
  }
  return q;
}
template <class S>
__device__ __forceinline__ void store_quad(S* p, const Quad& q, int64_t left, bool vec) {
  if (vec) {
    store_stream4(p, float4{q.v[0], q.v[1], q.v[2], q.v[3]});
  } else {
    FD_UNROLL
    for (int e = 0; e < 4; ++e)
      if (e < left) store_stream(p + e, q.v[e]);
  }
}

// u [n, d] = bf16(sum_j pre[j] * X_j), FP32 sum over j in order.
template <class S>
__global__ void hc_collapse_kernel(const S* X, const float* pre, int64_t n, int64_t hc, int64_t d,
                                   bool vec, float* u) {
  FD_GRID_PROLOGUE();
  const int64_t e0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (e0 >= d) return;
  for (int64_t row = blockIdx.y; row < n; row += gridDim.y) {
    Quad acc = {{0.0f, 0.0f, 0.0f, 0.0f}};
    FD_UNROLL
    for (int j = 0; j < kMaxHc; ++j) {
      if (j >= hc) break;
      const Quad x = load_quad(X + (row * hc + j) * d + e0, d - e0, vec);
      const float p = pre[row * hc + j];
      FD_UNROLL
      for (int e = 0; e < 4; ++e) acc.v[e] = __fadd_rn(acc.v[e], __fmul_rn(p, x.v[e]));
    }
    FD_UNROLL
    for (int e = 0; e < 4; ++e) acc.v[e] = round_bf16(acc.v[e]);
    store_quad(u + row * d + e0, acc, d - e0, vec);
  }
}

// out_k = bf16(post[k] * y + sum_j comb[j][k] * X_j), every stream k of a thread's four elements
// from one read of the hc streams.
template <class S>
__global__ void hc_expand_kernel(const S* X, const float* y, const float* post, const float* comb,
                                 int64_t n, int64_t hc, int64_t d, bool vec, S* out) {
  FD_GRID_PROLOGUE();
  const int64_t e0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (e0 >= d) return;
  for (int64_t row = blockIdx.y; row < n; row += gridDim.y) {
    Quad x[kMaxHc] = {};
    FD_UNROLL
    for (int j = 0; j < kMaxHc; ++j)
      if (j < hc) x[j] = load_quad(X + (row * hc + j) * d + e0, d - e0, vec);
    const Quad yq = load_quad(y + row * d + e0, d - e0, vec);
    const float* c = comb + row * hc * hc;
    FD_UNROLL
    for (int k = 0; k < kMaxHc; ++k) {
      if (k >= hc) break;
      Quad o;
      FD_UNROLL
      for (int e = 0; e < 4; ++e) {
        float acc = 0.0f;
        FD_UNROLL
        for (int j = 0; j < kMaxHc; ++j)
          if (j < hc) acc = __fadd_rn(acc, __fmul_rn(c[j * hc + k], x[j].v[e]));
        o.v[e] = round_bf16(__fadd_rn(__fmul_rn(post[row * hc + k], yq.v[e]), acc));
      }
      store_quad(out + (row * hc + k) * d + e0, o, d - e0, vec);
    }
  }
}

// A quad of the streams as the kernel holds it from its load to its use: F32 values, or BF16
// streams' bits (half the registers).
template <class S>
struct HeldQuad {
  Quad q;
};
template <>
struct HeldQuad<uint16_t> {
  uint2 bits;
};
__device__ __forceinline__ HeldQuad<float> load_held(const float* p) {
  return {load_quad(p, 4, true)};
}
__device__ __forceinline__ HeldQuad<uint16_t> load_held(const uint16_t* p) {
  return {*reinterpret_cast<const uint2*>(p)};
}
__device__ __forceinline__ Quad held_values(const HeldQuad<float>& h) {
  return h.q;
}
__device__ __forceinline__ Quad held_values(const HeldQuad<uint16_t>& h) {
  const float4 f = widen_bf16x4(h.bits.x, h.bits.y);
  return Quad{{f.x, f.y, f.z, f.w}};
}

// One block a row, the kernels of a sublayer boundary in one (on a decode step each was a launch
// and a round trip through memory on the critical path): kExpand: out = hc_expand's streams and u
// collapsed from them, else u collapsed from X; then u = bf16(norm * (u * rsqrt(mean(u^2) +
// eps))). hc_expand_kernel's and hc_collapse_kernel's arithmetic in their order; the squares
// summed per thread and then over the block (rms_norm's order differs only in which thread adds
// which square). Thread t takes quads t and t + blockDim.x of the row (d a multiple of 4, at most
// kNormQuads * 4 * kNormThreads values): every load of the row is issued before the first use.
// At most 768 threads, so that the expansion's held streams fit 80 registers without spilling
// (at 1024 threads and 64 registers, ptxas spilled 36 bytes). At one block a multiprocessor a
// prefill's rows run one after another on each, and the time is their latency more than their
// bytes: BF16 streams (40% fewer bytes) took 491 µs an 8K-row boundary against 467 on F32 ones
// (H200). What made room for a second block: the row's mixes read from shared memory at each use
// (24 registers when hoisted) and BF16 streams held as their bits until used (HeldQuad). A BF16
// thread's two quads as one 16-byte load (525 µs) and blocks walking rows with the next row
// copied into shared memory (488 µs BF16, 555 F32) measured no faster.
constexpr int kNormQuads = 2;
constexpr int kNormThreads = 768;
// A prefill's rows (from kTwoBlockRowsFrom) in blocks of at most 640 threads held to 48 registers,
// two a multiprocessor, so one block's loads overlap the other's sum and stores: 455 -> 356 µs an
// 8K-row boundary on BF16 streams (H200). A decode step's few rows keep the 80-register form
// (its spill-free chains measured 2-5 µs a layer faster).
constexpr int kNormThreadsTwoBlocks = 640;
constexpr int64_t kTwoBlockRowsFrom = 256;
template <bool kExpand, class S, int kBlocks>
__global__ void __launch_bounds__(kBlocks == 2 ? kNormThreadsTwoBlocks : kNormThreads, kBlocks)
    hc_collapse_norm_kernel(const S* __restrict__ X, const float* __restrict__ y,
                            const float* __restrict__ post, const float* __restrict__ comb,
                            const float* __restrict__ pre, const float* __restrict__ norm,
                            float eps, int64_t hc, int64_t d, S* __restrict__ out,
                            float* __restrict__ u) {
  __shared__ float scratch[32];
  __shared__ float mix_s[kMaxHc * kMaxHc + 2 * kMaxHc];  // the row's comb, post, pre
  const int64_t row = blockIdx.x;
  FD_GRID_PROLOGUE();
  // The row's mixes in shared memory, read there at each use: held in registers (24 of them) they
  // kept the block at one a multiprocessor.
  if (threadIdx.x < hc * hc)
    mix_s[threadIdx.x] = kExpand ? comb[row * hc * hc + threadIdx.x] : 0.0f;
  if (threadIdx.x < hc) {
    mix_s[kMaxHc * kMaxHc + threadIdx.x] = kExpand ? post[row * hc + threadIdx.x] : 0.0f;
    mix_s[kMaxHc * kMaxHc + kMaxHc + threadIdx.x] = pre[row * hc + threadIdx.x];
  }
  __syncthreads();
  HeldQuad<S> held[kNormQuads][kMaxHc] = {};
  Quad yq[kNormQuads] = {};
  FD_UNROLL
  for (int s = 0; s < kNormQuads; ++s) {
    const int64_t e0 = (threadIdx.x + static_cast<int64_t>(s) * blockDim.x) * 4;
    if (e0 >= d) break;
    FD_UNROLL
    for (int j = 0; j < kMaxHc; ++j)
      if (j < hc) held[s][j] = load_held(X + (row * hc + j) * d + e0);
    if constexpr (kExpand) yq[s] = load_quad(y + row * d + e0, 4, true);
  }
  Quad v[kNormQuads] = {};
  float ss = 0.0f;
  FD_UNROLL
  for (int s = 0; s < kNormQuads; ++s) {
    const int64_t e0 = (threadIdx.x + static_cast<int64_t>(s) * blockDim.x) * 4;
    if (e0 >= d) break;
    Quad x[kMaxHc];
    FD_UNROLL
    for (int j = 0; j < kMaxHc; ++j) x[j] = held_values(held[s][j]);
    if constexpr (kExpand) {
      const volatile float* c = mix_s;
      Quad o[kMaxHc];
      FD_UNROLL
      for (int k = 0; k < kMaxHc; ++k) {
        if (k >= hc) break;
        FD_UNROLL
        for (int e = 0; e < 4; ++e) {
          float acc = 0.0f;
          FD_UNROLL
          for (int j = 0; j < kMaxHc; ++j)
            if (j < hc) acc = __fadd_rn(acc, __fmul_rn(c[j * hc + k], x[j].v[e]));
          o[k].v[e] = round_bf16(__fadd_rn(__fmul_rn(c[kMaxHc * kMaxHc + k], yq[s].v[e]), acc));
        }
        store_quad(out + (row * hc + k) * d + e0, o[k], 4, true);
      }
      FD_UNROLL
      for (int k = 0; k < kMaxHc; ++k)
        if (k < hc) x[k] = o[k];
    }
    FD_UNROLL
    for (int j = 0; j < kMaxHc; ++j) {
      if (j >= hc) break;
      const float p = static_cast<const volatile float*>(mix_s)[kMaxHc * kMaxHc + kMaxHc + j];
      FD_UNROLL
      for (int e = 0; e < 4; ++e) v[s].v[e] = __fadd_rn(v[s].v[e], __fmul_rn(p, x[j].v[e]));
    }
    FD_UNROLL
    for (int e = 0; e < 4; ++e) {
      v[s].v[e] = round_bf16(v[s].v[e]);
      ss += v[s].v[e] * v[s].v[e];
    }
  }
  const float r = 1.0f / sqrtf(block_sum(ss, scratch) / static_cast<float>(d) + eps);
  FD_UNROLL
  for (int s = 0; s < kNormQuads; ++s) {
    const int64_t e0 = (threadIdx.x + static_cast<int64_t>(s) * blockDim.x) * 4;
    if (e0 >= d) break;
    const Quad w = load_quad(norm + e0, 4, true);
    Quad o;
    FD_UNROLL
    for (int e = 0; e < 4; ++e) o.v[e] = round_bf16(__fmul_rn(w.v[e], __fmul_rn(v[s].v[e], r)));
    store_quad(u + row * d + e0, o, 4, true);
  }
}

// hc_collapse_norm_kernel over n rows: the two-blocks-a-multiprocessor form for a prefill's rows
// where the row fits its blocks (and two_blocks, the backend's setting), else the other.
template <bool kExpand, class S>
void launch_collapse_norm(cudaStream_t stream, bool two_blocks, unsigned threads, int64_t n,
                          const S* X, const float* y, const float* post, const float* comb,
                          const float* pre, const float* norm, float eps, int64_t hc, int64_t d,
                          S* out, float* u) {
  const auto kernel = two_blocks && n >= kTwoBlockRowsFrom && threads <= kNormThreadsTwoBlocks
                          ? hc_collapse_norm_kernel<kExpand, S, 2>
                          : hc_collapse_norm_kernel<kExpand, S, 1>;
  FD_LAUNCH(kernel, dim3(static_cast<unsigned>(n)), dim3(threads), 0, stream, X, y, post, comb, pre,
            norm, eps, hc, d, out, u);
}

// The block of hc_collapse_norm_kernel for rows of d values (0: the kernel does not take them).
unsigned collapse_norm_threads(int64_t d) {
  const int64_t quads = d / 4, threads = ((quads + kNormQuads - 1) / kNormQuads + 31) / 32 * 32;
  return d % 4 != 0 || threads > kNormThreads
             ? 0u
             : static_cast<unsigned>(std::max<int64_t>(threads, 32));
}

}  // namespace
}  // namespace cuda

using cuda::blocks_for;
using cuda::ptr;

void CudaBackend::hc_mixes(const Tensor& X, const HcParams& p, const HcSettings& s, Tensor& pre,
                           Tensor& post, Tensor& comb) {
  check_hc_mix_args(X, p, s, pre, post, comb);
  FD_CHECK(s.hc >= 1 && s.hc <= cuda::kMaxHc, "hc_mixes: hc above 4 is not supported on CUDA");
  const int64_t n = X.rows(), flat = X.shape().row_numel();
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  cuda::MixShape shape{};
  shape.n = n;
  shape.flat = flat;
  shape.hc = s.hc;
  shape.n_mix = (2 + s.hc) * s.hc;
  shape.norm_eps = s.norm_eps;
  shape.hc_eps = s.hc_eps;
  shape.iters = s.sinkhorn_iters;
  // A prefill's rows on the tensor cores where the shape allows.
  if (cuda::run_hc_mixes_tc(*ctx_, X, ptr<const float>(p.fn), ptr<const float>(p.base),
                            ptr<const float>(p.scale), shape, ptr<float>(pre), ptr<float>(post),
                            ptr<float>(comb)))
    return;
  shape.splits = (flat + cuda::kSplitElems - 1) / cuda::kSplitElems;
  shape.tile_rows = n >= cuda::kManyRowsFrom ? cuda::kManyRows : cuda::kFewRows;
  const int64_t tiles = (n + shape.tile_rows - 1) / shape.tile_rows;
  Tensor partial = ctx_->scratch(DType::F32, Shape{n, shape.splits, cuda::kSums});
  unsigned* done = ctx_->arrival_counters(tiles);
  cuda::with_stream_type(X, "hc_mixes", [&](auto tag) {
    using S = cuda::StreamOf<decltype(tag)>;
    FD_LAUNCH(cuda::hc_mix_kernel<S>,
              dim3(static_cast<unsigned>(shape.splits), static_cast<unsigned>(tiles)),
              dim3(cuda::kMixThreads), 0, ctx_->stream(), ptr<const S>(X), ptr<const float>(p.fn),
              ptr<const float>(p.base), ptr<const float>(p.scale), shape, ptr<float>(partial), done,
              ptr<float>(pre), ptr<float>(post), ptr<float>(comb));
  });
}

void CudaBackend::hc_collapse(const Tensor& X, const Tensor& pre, Tensor& u) {
  const int64_t n = X.rows(), hc = pre.dim(1), d = X.shape().row_numel() / hc;
  check_shape(u, Shape{n, d}, "hc_collapse out");
  FD_CHECK(pre.rows() == n, "hc_collapse: pre rows");
  FD_CHECK(hc <= cuda::kMaxHc, "hc_collapse: hc above 4 is not supported on CUDA");
  if (n * d == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  const bool vec = d % 4 == 0 && cuda::aligned16(X.bytes()) && cuda::aligned16(u.bytes());
  cuda::with_stream_type(X, "hc_collapse", [&](auto tag) {
    using S = cuda::StreamOf<decltype(tag)>;
    FD_LAUNCH(cuda::hc_collapse_kernel<S>, cuda::four_column_grid(n, d), dim3(256), 0,
              ctx_->stream(), ptr<const S>(X), ptr<const float>(pre), n, hc, d, vec, ptr<float>(u));
  });
}

void CudaBackend::hc_expand(const Tensor& X, const Tensor& y, const Tensor& post,
                            const Tensor& comb, Tensor& out) {
  const int64_t n = X.rows(), hc = post.dim(1), d = X.shape().row_numel() / hc;
  check_shape(y, Shape{n, d}, "hc_expand y");
  check_shape(comb, Shape{n, hc, hc}, "hc_expand comb");
  FD_CHECK(out.numel() == X.numel() && out.bytes() != X.bytes(), "hc_expand: out must not alias X");
  FD_CHECK(out.dtype() == X.dtype(), "hc_expand: out must be stored as X is");
  FD_CHECK(hc <= cuda::kMaxHc, "hc_expand: hc above 4 is not supported on CUDA");
  if (n * d == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  const bool vec = d % 4 == 0 && cuda::aligned16(X.bytes()) && cuda::aligned16(y.bytes()) &&
                   cuda::aligned16(out.bytes());
  cuda::with_stream_type(X, "hc_expand", [&](auto tag) {
    using S = cuda::StreamOf<decltype(tag)>;
    FD_LAUNCH(cuda::hc_expand_kernel<S>, cuda::four_column_grid(n, d), dim3(256), 0, ctx_->stream(),
              ptr<const S>(X), ptr<const float>(y), ptr<const float>(post), ptr<const float>(comb),
              n, hc, d, vec, ptr<S>(out));
  });
}

void CudaBackend::hc_collapse_norm(const Tensor& X, const Tensor& pre, const Tensor& norm,
                                   float eps, Tensor& u) {
  const int64_t n = X.rows(), hc = pre.dim(1), d = X.shape().row_numel() / hc;
  check_shape(u, Shape{n, d}, "hc_collapse_norm out");
  check_shape(norm, Shape{d}, "hc_collapse_norm weight");
  FD_CHECK(pre.rows() == n, "hc_collapse_norm: pre rows");
  const unsigned threads = cuda::collapse_norm_threads(d);
  if (!fuse_ || threads == 0 || hc > cuda::kMaxHc || !cuda::aligned16(X.bytes()) ||
      !cuda::aligned16(u.bytes()) || !cuda::aligned16(norm.bytes()))
    return Backend::hc_collapse_norm(X, pre, norm, eps, u);
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  cuda::with_stream_type(X, "hc_collapse_norm", [&](auto tag) {
    using S = cuda::StreamOf<decltype(tag)>;
    cuda::launch_collapse_norm<false, S>(
        ctx_->stream(), two_block_boundaries_, threads, n, ptr<const S>(X), nullptr, nullptr,
        nullptr, ptr<const float>(pre), ptr<const float>(norm), eps, hc, d, nullptr, ptr<float>(u));
  });
}

void CudaBackend::hc_expand_collapse_norm(const Tensor& X, const Tensor& y, const Tensor& post,
                                          const Tensor& comb, const Tensor& pre, const Tensor& norm,
                                          float eps, Tensor& out, Tensor& u) {
  const int64_t n = X.rows(), hc = post.dim(1), d = X.shape().row_numel() / hc;
  check_shape(y, Shape{n, d}, "hc_expand_collapse_norm y");
  check_shape(comb, Shape{n, hc, hc}, "hc_expand_collapse_norm comb");
  check_shape(pre, Shape{n, hc}, "hc_expand_collapse_norm pre");
  check_shape(u, Shape{n, d}, "hc_expand_collapse_norm u");
  check_shape(norm, Shape{d}, "hc_expand_collapse_norm weight");
  FD_CHECK(out.numel() == X.numel() && out.bytes() != X.bytes(),
           "hc_expand_collapse_norm: out must not alias X");
  FD_CHECK(out.dtype() == X.dtype(), "hc_expand_collapse_norm: out must be stored as X is");
  const unsigned threads = cuda::collapse_norm_threads(d);
  if (!fuse_ || threads == 0 || hc > cuda::kMaxHc ||
      !(cuda::aligned16(X.bytes()) && cuda::aligned16(y.bytes()) && cuda::aligned16(out.bytes()) &&
        cuda::aligned16(u.bytes()) && cuda::aligned16(norm.bytes())))
    return Backend::hc_expand_collapse_norm(X, y, post, comb, pre, norm, eps, out, u);
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  cuda::with_stream_type(X, "hc_expand_collapse_norm", [&](auto tag) {
    using S = cuda::StreamOf<decltype(tag)>;
    cuda::launch_collapse_norm<true, S>(
        ctx_->stream(), two_block_boundaries_, threads, n, ptr<const S>(X), ptr<const float>(y),
        ptr<const float>(post), ptr<const float>(comb), ptr<const float>(pre),
        ptr<const float>(norm), eps, hc, d, ptr<S>(out), ptr<float>(u));
  });
}

}  // namespace flashdesk
