// The mHC mixes of a prefill on the tensor cores (hc_mix.cuh; the CUDA-core kernel of hc.cu takes
// a few rows). The 24 dot products of a row with fn are a GEMM [rows, flat] x [flat, 24]: a CTA
// takes 64 rows and a split of flat (at most four CTAs a multiprocessor in all), four warps of 16
// rows by the 24 mixes (three 8-wide mma tiles). X and fn are F32, so each is split into three BF16
// planes (hi, mid, lo: their sum is the F32 value exactly) and the products of the planes whose
// orders add up to at most 2 are summed (hi.hi, hi.mid, mid.hi, hi.lo, mid.mid, lo.hi; the three
// left out are below 2^-24 of the product): each is exact in FP32, only the order of the FP32 sums
// differs from the CUDA-core kernel's (the mixes are compared within 1e-4, as that kernel's split
// sums are). A 64-wide chunk's products go into fresh accumulators and are added on the CUDA cores
// (the tensor cores truncate as they accumulate). The model's streams are BF16 values (every
// writer rounds them), whose mid and lo planes are zero: a chunk whose X values are all BF16
// stages only the hi plane and runs only the products of X's hi plane (hi.hi, hi.mid, hi.lo, the
// same sums: the others add zeros), half the products and a third of the X staging. H200, an
// 8K-token call (Nsight Compute): 447 us against 459 with every plane: the kernel waits on its
// loads more than it issues. Streams stored as BF16 (Backend::stream_dtype) are that hi plane as
// read, eight values a 16-byte load: 252 µs a call against 398 on F32 streams. The sum of squares
// is formed on the CUDA cores while staging. The split sums then go through the shared end
// (finish_mix_tile): the last block of a row tile combines the splits in order and runs the
// Sinkhorn. One CUDA-core block a 32-row tile and 512-wide split took 1.4 ms an 8K-token prefill's
// call, bound by its per-row reductions.
#include <algorithm>

#include "engine/ops/cuda/bf16_codes.cuh"
#include "engine/ops/cuda/hc_mix.cuh"
#include "engine/ops/cuda/mma.cuh"
#include "engine/ops/cuda/stream_io.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kRows = 64;            // rows of a tile
constexpr int kThreads = 128;        // four warps of 16 rows
constexpr int kChunk = 64;           // flat elements a step
constexpr int kStride = kChunk + 8;  // BF16 a staged row: ldmatrix rows on distinct banks
constexpr int kPlanes = 3;
constexpr int kMixRowsPadded = 32;  // B rows staged (mixes past n_mix zero)
constexpr int kMixTiles = kMaxMix / 8;
constexpr int kXPlaneElems = kRows * kStride, kFPlaneElems = kMixRowsPadded * kStride;
constexpr size_t kSmemBytes = kPlanes * (kXPlaneElems + kFPlaneElems) * sizeof(uint16_t);
static_assert(kRows * kSums * sizeof(float) <= kSmemBytes, "row sums alias the staging");

// x0 and x1 as three BF16 pairs whose sums are x0 and x1 (exact for finite values: each step's
// remainder is exact in F32 and has 8 fewer significant bits), plane by plane; x0 in the low
// halves. The roundings are pair conversions (bf16x2_rn): about five instructions a value, where
// f32_to_bf16_bits took about fifteen and left the kernel issue-bound on its staging.
__device__ __forceinline__ void split_bf16x3(float x0, float x1, uint32_t (&p)[kPlanes]) {
  const auto lo = [](uint32_t w) { return __uint_as_float(w << 16); };
  const auto hi = [](uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); };
  p[0] = bf16x2_rn(x0, x1);
  const float r0 = x0 - lo(p[0]), r1 = x1 - hi(p[0]);
  p[1] = bf16x2_rn(r0, r1);
  p[2] = bf16x2_rn(r0 - lo(p[1]), r1 - hi(p[1]));
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    hc_mix_tc_kernel(const S* X, const float* fn, const float* base, const float* scale, MixShape s,
                     float* partial, unsigned* done, float* pre, float* post, float* comb) {
  FD_GRID_PROLOGUE();
  __shared__ __align__(16) unsigned char smem[kSmemBytes];
  __shared__ unsigned is_last;
  uint16_t* const xs = reinterpret_cast<uint16_t*>(smem);  // [kPlanes][kRows][kStride]
  uint16_t* const fs = xs + kPlanes * kXPlaneElems;        // [kPlanes][32][kStride]
  const int64_t split = blockIdx.x, tile = blockIdx.y;
  const int64_t k0 = split * s.split_len,
                k1 = k0 + s.split_len < s.flat ? k0 + s.split_len : s.flat;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, c = 2 * (lane & 3);

  // The fn rows past the mixes stay zero.
  for (int i = tid; i < kPlanes * kFPlaneElems; i += kThreads) fs[i] = 0;

  // This thread's staging: 32 values of row tid / 2 (rows past the call read as zero) and three
  // groups of four fn values (the chunk's 24 x 64 values as 384 groups).
  const int x_row = tid >> 1, x_off = (tid & 1) * 32;
  const int64_t row = tile * kRows + x_row;
  // BF16 streams are their own hi plane: read 16 bytes a load (xw) and staged as read; F32 ones a
  // float4 a load (xr). Eight BF16 values a load, not four, matter: the kernel waits on its loads
  // in flight, not on their bytes.
  constexpr bool kBf16 = std::is_same_v<S, uint16_t>;
  const S* x_src = row < s.n ? X + row * s.flat + x_off : nullptr;
  float4 xr[kBf16 ? 1 : 8], fr[3];
  uint4 xw[kBf16 ? 4 : 1];
  auto load = [&](int64_t kc) {
    if constexpr (kBf16) {
      FD_UNROLL
      for (int i = 0; i < 4; ++i)
        xw[i] = x_src ? *reinterpret_cast<const uint4*>(x_src + kc + 8 * i) : uint4{0u, 0u, 0u, 0u};
    } else {
      FD_UNROLL
      for (int i = 0; i < 8; ++i)
        xr[i] = x_src ? load_stream4(x_src + kc + 4 * i) : float4{0.0f, 0.0f, 0.0f, 0.0f};
    }
    FD_UNROLL
    for (int i = 0; i < 3; ++i) {
      const int q = tid + kThreads * i, m = q / 16, col = 4 * (q % 16);
      fr[i] = m < s.n_mix ? *reinterpret_cast<const float4*>(fn + m * s.flat + kc + col)
                          : float4{0.0f, 0.0f, 0.0f, 0.0f};
    }
  };
  // Whether this thread's loaded X values are not all BF16 values (never, from BF16 streams).
  auto beyond_bf16 = [&] {
    uint32_t low = 0;
    if constexpr (!kBf16) {
      FD_UNROLL
      for (int i = 0; i < 8; ++i)
        low |= __float_as_uint(xr[i].x) | __float_as_uint(xr[i].y) | __float_as_uint(xr[i].z) |
               __float_as_uint(xr[i].w);
    }
    return (low & 0xFFFFu) != 0u;
  };
  float squares = 0.0f;  // this thread's part of its row's sum of squares
  // The chunk into the planes: X's three (all_planes) or its hi plane alone, fn's three.
  auto stage = [&](bool all_planes) {
    if constexpr (kBf16) {
      FD_UNROLL
      for (int i = 0; i < 4; ++i) {
        const float4 a = widen_bf16x4(xw[i].x, xw[i].y), b = widen_bf16x4(xw[i].z, xw[i].w);
        const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        FD_UNROLL
        for (int e = 0; e < 8; ++e) squares += v[e] * v[e];  // in the F32 path's order
        *reinterpret_cast<uint4*>(xs + x_row * kStride + x_off + 8 * i) = xw[i];
      }
    }
    FD_UNROLL
    for (int i = 0; i < (kBf16 ? 0 : 8); ++i) {
      const float v[4] = {xr[i].x, xr[i].y, xr[i].z, xr[i].w};
      FD_UNROLL
      for (int e = 0; e < 4; ++e) squares += v[e] * v[e];
      uint16_t* dst = xs + x_row * kStride + x_off + 4 * i;
      if (all_planes) {
        uint32_t p01[kPlanes], p23[kPlanes];
        split_bf16x3(v[0], v[1], p01);
        split_bf16x3(v[2], v[3], p23);
        FD_UNROLL
        for (int pl = 0; pl < kPlanes; ++pl)
          *reinterpret_cast<uint2*>(dst + pl * kXPlaneElems) = uint2{p01[pl], p23[pl]};
      } else {
        *reinterpret_cast<uint2*>(dst) =
            uint2{(__float_as_uint(v[0]) >> 16) | (__float_as_uint(v[1]) & 0xFFFF0000u),
                  (__float_as_uint(v[2]) >> 16) | (__float_as_uint(v[3]) & 0xFFFF0000u)};
      }
    }
    FD_UNROLL
    for (int i = 0; i < 3; ++i) {
      const int q = tid + kThreads * i, m = q / 16, col = 4 * (q % 16);
      if (m >= s.n_mix) continue;
      uint32_t p01[kPlanes], p23[kPlanes];
      split_bf16x3(fr[i].x, fr[i].y, p01);
      split_bf16x3(fr[i].z, fr[i].w, p23);
      FD_UNROLL
      for (int pl = 0; pl < kPlanes; ++pl)
        *reinterpret_cast<uint2*>(fs + pl * kFPlaneElems + m * kStride + col) =
            uint2{p01[pl], p23[pl]};
    }
  };

  float acc[kMixTiles][4] = {};
  const int a_frag = (16 * warp + (lane & 15)) * kStride + (lane >> 4) * 8;
  const int b_frag = (((lane >> 4) & 1) * 8 + (lane & 7)) * kStride + ((lane >> 3) & 1) * 8;
  load(k0);
  for (int64_t kc = k0; kc < k1; kc += kChunk) {
    // The previous chunk's fragments are read; whether any of this chunk's X values is not BF16.
    const bool all_planes = __syncthreads_or(beyond_bf16()) != 0;
    stage(all_planes);
    __syncthreads();
    if (kc + kChunk < k1) load(kc + kChunk);
    float part[kMixTiles][4] = {};
    FD_UNROLL
    for (int kk = 0; kk < kChunk; kk += 16) {
      uint32_t a[kPlanes][4], b[kPlanes][4][2];
      FD_UNROLL
      for (int pl = 0; pl < kPlanes; ++pl) {
        if (pl == 0 || all_planes) ldmatrix_x4(a[pl], xs + pl * kXPlaneElems + a_frag + kk);
        FD_UNROLL
        for (int np = 0; np < 2; ++np) {
          uint32_t r[4];
          ldmatrix_x4(r, fs + pl * kFPlaneElems + b_frag + 16 * np * kStride + kk);
          b[pl][2 * np][0] = r[0];
          b[pl][2 * np][1] = r[1];
          b[pl][2 * np + 1][0] = r[2];
          b[pl][2 * np + 1][1] = r[3];
        }
      }
      FD_UNROLL
      for (int i = 0; i < kPlanes; ++i) {
        if (i > 0 && !all_planes) break;
        FD_UNROLL
        for (int j = 0; i + j < kPlanes; ++j) FD_UNROLL
        for (int nt = 0; nt < kMixTiles; ++nt) mma_bf16_16816(part[nt], a[i], b[j][nt]);
      }
    }
    FD_UNROLL
    for (int nt = 0; nt < kMixTiles; ++nt) FD_UNROLL
    for (int e = 0; e < 4; ++e) acc[nt][e] += part[nt][e];
  }

  // The split's sums: rows 16 warp + g (+ 8), mixes 8 nt + c (+ 1); the squares from the row's
  // two staging threads.
  FD_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int64_t r = tile * kRows + 16 * warp + g + 8 * half;
    if (r >= s.n) continue;
    float* dst = partial + (r * s.splits + split) * kSums;
    FD_UNROLL
    for (int nt = 0; nt < kMixTiles; ++nt) FD_UNROLL
    for (int e = 0; e < 2; ++e) {
      const int m = 8 * nt + c + e;
      if (m < s.n_mix) dst[m] = acc[nt][2 * half + e];
    }
  }
  squares += __shfl_xor_sync(kFullMask, squares, 1);
  if ((tid & 1) == 0 && row < s.n) partial[(row * s.splits + split) * kSums + kMaxMix] = squares;
  __syncthreads();  // the staging is free for the row sums
  finish_mix_tile(s, tile, partial, done, base, scale, reinterpret_cast<float(*)[kSums]>(smem),
                  &is_last, pre, post, comb);
}

}  // namespace

bool run_hc_mixes_tc(DeviceContext& ctx, const Tensor& X, const float* fn, const float* base,
                     const float* scale, const MixShape& shape, float* pre, float* post,
                     float* comb) {
  if (shape.n < kTcMixRowsFrom || shape.flat % kChunk != 0 || shape.n_mix > kMaxMix) return false;
  MixShape s = shape;
  s.tile_rows = kRows;
  const int64_t tiles = (s.n + kRows - 1) / kRows, chunks = s.flat / kChunk;
  // At most four CTAs a multiprocessor, one wave (an 8K-token prefill's 128 tiles in 4 splits of
  // 5120: 5 splits, 1.2 waves, took 0.73 ms a call).
  const int64_t want =
      std::clamp<int64_t>(4 * static_cast<int64_t>(ctx.multiprocessors()) / tiles, 1, chunks);
  s.split_len = (chunks + want - 1) / want * kChunk;
  s.splits = (s.flat + s.split_len - 1) / s.split_len;
  Tensor partial = ctx.scratch(DType::F32, Shape{s.n, s.splits, kSums});
  unsigned* done = ctx.arrival_counters(tiles);
  with_stream_type(X, "hc_mixes", [&](auto tag) {
    using S = StreamOf<decltype(tag)>;
    FD_LAUNCH(hc_mix_tc_kernel<S>,
              dim3(static_cast<unsigned>(s.splits), static_cast<unsigned>(tiles)), dim3(kThreads),
              0, ctx.stream(), ptr<const S>(X), fn, base, scale, s, ptr<float>(partial), done, pre,
              post, comb);
  });
  return true;
}

}  // namespace flashdesk::cuda
