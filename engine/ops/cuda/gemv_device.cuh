// Device pieces of the weight-streaming GEMV kernels shared by linear.cu and moe.cu (the design is
// in docs/cuda-backend.md "Kernels"):
//   - a lane reads 16 bytes of a weight row at a time (FP4: 32 columns, exactly one scale block;
//     FP8: 16; BF16: 8; F32: 4) with a streaming load, narrower loads where a row's start is not
//     16-byte aligned or the row ends inside the chunk;
//   - the codes are decoded in registers by placing their bits in an FP32 word: FP8 codes become
//     code * 2^-120 and FP4 codes code * 2^-126 (denormal for the smallest codes, which FP32
//     arithmetic keeps exactly: nothing here may be built with -ftz or --use_fast_math);
//   - activation rows are staged in shared memory in a lane-interleaved layout (lane L's float4
//     number q of a warp step sits at q*128 + L*4 floats, so the warp's wide reads hit distinct
//     banks), act_quant'ed per 32 columns when asked; in front of the scaled decoders they are
//     staged as (E4M3 code * act scale) * 2^40, so every product of the two is a normal FP32 number
//     and the block sums equal the definition's times 2^(40 - bias) exactly; the weight's block
//     scale times 2^(bias - 40) undoes that (exact for act scales below 2^79 and weight scales
//     below 2^41, far beyond any checkpoint's);
//   - a block stages once and loops over its share of the row tiles (stream_tiles), so the staging
//     is paid once per several tiles even at eight activation rows.
// The products are exact FP32 products of decoded codes and staged activations, each lane's chunk
// sum is scaled by its power-of-two block scale, sums are FP32: only the order of the FP32 sums
// differs from the CPU reference (docs/numerics.md "Linear layers").
#pragma once

#include <cstdint>

#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/weights.h"

namespace flashdesk::cuda {

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;
// Blocks of the streaming kernels resident on a multiprocessor (their __launch_bounds__: at most
// 128 registers a thread; at most 48 KiB of staged activations a block).
constexpr int kGemvBlocksPerSm = 2;

// Blocks along a dimension of `tiles` row tiles when `others` blocks share each of its positions
// (K splits x groups, or expert slots): about one wave of `capacity` resident blocks in all, each
// looping over an equal share of the tiles (stream_tiles).
inline int64_t tile_blocks(int64_t tiles, int64_t others, int64_t capacity) {
  const int64_t target = capacity / others > 1 ? capacity / others : 1;
  const int64_t per_block = (tiles + target - 1) / target;
  return (tiles + per_block - 1) / per_block;
}

// What act_quant'ed activations are multiplied by when staged in front of the scaled decoders.
constexpr float kStageFactor = 0x1p40f;

// How one lane reads a row: VW columns per 16-byte chunk, W columns per warp step.
template <WeightFormat F>
struct Chunk {
  static constexpr bool kCoded = F == WeightFormat::Fp8Block || F == WeightFormat::Fp4Row;
  static constexpr int VW = F == WeightFormat::Fp4Row     ? 32
                            : F == WeightFormat::Fp8Block ? 16
                            : F == WeightFormat::Bf16     ? 8
                                                          : 4;
  static constexpr int W = 32 * VW;
  // Bytes of `cols` columns of a row (FP4: two columns a byte).
  static constexpr int64_t bytes(int64_t cols) {
    return F == WeightFormat::Fp4Row     ? cols / 2
           : F == WeightFormat::Fp8Block ? cols
           : F == WeightFormat::Bf16     ? 2 * cols
                                         : 4 * cols;
  }
  // The scaled decoders give code * 2^-kBias (FP8: E4M3 has exponent bias 7, FP32 127).
  static constexpr int kBias = F == WeightFormat::Fp4Row ? 126 : 120;
};

// ---- weight chunks -----------------------------------------------------------------------------

// Bytes [0, 16) of a chunk from a row start that is not 16-byte aligned, or a chunk that ends
// past the row (bytes at or past `valid` read as zero, which every format decodes to 0).
inline __device__ __noinline__ uint4 load_chunk_narrow(const uint8_t* p, int64_t valid) {
  uint32_t w[4] = {0, 0, 0, 0};
  FD_UNROLL
  for (int b = 0; b < 16; ++b)
    if (b < valid) w[b / 4] |= static_cast<uint32_t>(__ldg(p + b)) << (8 * (b % 4));
  uint4 r;
  r.x = w[0];
  r.y = w[1];
  r.z = w[2];
  r.w = w[3];
  return r;
}

// The 16 bytes of columns [col, col + VW) of a row of k columns starting at `row`.
template <WeightFormat F>
__device__ __forceinline__ uint4 load_chunk(const uint8_t* row, bool row_aligned, int64_t col,
                                            int64_t k) {
  using C = Chunk<F>;
  const uint8_t* p = row + C::bytes(col);
  if (row_aligned && col + C::VW <= k) return load_streaming(p);
  return load_chunk_narrow(p, C::bytes(k) - C::bytes(col));
}

__device__ __forceinline__ uint32_t word_of(const uint4& r, int i) {
  return i == 0 ? r.x : i == 1 ? r.y : i == 2 ? r.z : r.w;
}

// FP8 byte b (0..3) of w as code * 2^-120: the byte sign-extended to the top of the word, then
// shifted so its 7 magnitude bits land on the low exponent and high mantissa bits.
__device__ __forceinline__ float e4m3_scaled(uint32_t w, int b) {
  const int32_t top = static_cast<int32_t>(w << (24 - 8 * b));
  return __uint_as_float(static_cast<uint32_t>(top >> 4) & 0x87F00000u);
}

// FP4 nibbles 0..7 of w as code * 2^-126. A multiplication by 2^s + 2^(s+6) places a nibble's
// magnitude bits at 22..24 and its sign bit at 31 at once, and the mask keeps those; the nibbles
// are isolated in pairs 16 bits apart first, the pair's other member being pushed out of the word
// or below the mask by the same multiplication.
__device__ __forceinline__ void e2m1x8_scaled(uint32_t w, float* v) {
  const uint32_t even = w & 0x000F000Fu, odd = w & 0x00F000F0u;                  // 0, 4 / 1, 5
  const uint32_t even2 = (w >> 8) & 0x000F000Fu, odd2 = (w >> 8) & 0x00F000F0u;  // 2, 6 / 3, 7
  constexpr uint32_t kMask = 0x81C00000u;
  v[0] = __uint_as_float((even * 0x10400000u) & kMask);
  v[1] = __uint_as_float((odd * 0x01040000u) & kMask);
  v[2] = __uint_as_float((even2 * 0x10400000u) & kMask);
  v[3] = __uint_as_float((odd2 * 0x01040000u) & kMask);
  v[4] = __uint_as_float((even * 0x1040u) & kMask);
  v[5] = __uint_as_float((odd * 0x104u) & kMask);
  v[6] = __uint_as_float((even2 * 0x1040u) & kMask);
  v[7] = __uint_as_float((odd2 * 0x104u) & kMask);
}

// Whether this compilation's device code has the hardware's E4M3 conversion (sm_89 on). Where it
// has not (the sm_80 code, which Ampere and Ada GPUs run, and the emulation), the GEMV's kValues
// form is its shifts' form, so asking for the conversion costs nothing there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
constexpr bool kHasE4m3Conversion = true;
#else
constexpr bool kHasE4m3Conversion = false;
#endif

// FP8 bytes 0..3 of w as the codes' values through the hardware's conversion (sm_89 on: two
// E4M3 codes to an FP16 pair in one instruction, then each widened): 1.5 instructions a value
// where e4m3_scaled takes 2.75. Called only where kHasE4m3Conversion; elsewhere it compiles to
// e4m3_scaled's codes times 2^120 (exact: a power of two).
__device__ __forceinline__ void e4m3x4_values(uint32_t w, float* v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n"
      "  .reg .b16 c01, c23, h0, h1, h2, h3;\n"
      "  .reg .b32 p01, p23;\n"
      "  mov.b32 {c01, c23}, %4;\n"
      "  cvt.rn.f16x2.e4m3x2 p01, c01;\n"
      "  cvt.rn.f16x2.e4m3x2 p23, c23;\n"
      "  mov.b32 {h0, h1}, p01;\n"
      "  mov.b32 {h2, h3}, p23;\n"
      "  cvt.f32.f16 %0, h0;\n"
      "  cvt.f32.f16 %1, h1;\n"
      "  cvt.f32.f16 %2, h2;\n"
      "  cvt.f32.f16 %3, h3;\n"
      "}\n"
      : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
      : "r"(w));
#else
  FD_UNROLL
  for (int b = 0; b < 4; ++b) v[b] = e4m3_scaled(w, b) * 0x1p120f;
#endif
}

// Columns decoded together: a 32-bit word of FP4 (8), four columns of the other formats.
template <WeightFormat F>
constexpr int kGroupCols = F == WeightFormat::Fp4Row ? 8 : 4;

// Columns [G i, G i + G) of a chunk (G = kGroupCols<F>) as values: scaled codes (kExact false: FP8
// / FP4 as code * 2^-kBias), or the codes' values (kExact; BF16 and F32 are always exact).
// kValues: FP8 by e4m3x4_values where the code has the conversion, the codes' values whether
// kExact or not.
template <WeightFormat F, bool kExact, bool kValues = false>
__device__ __forceinline__ void decode_group(const uint4& raw, int i, float* v) {
  if constexpr (F == WeightFormat::Fp8Block && kValues && kHasE4m3Conversion) {
    e4m3x4_values(word_of(raw, i), v);
    return;
  } else if constexpr (F == WeightFormat::Fp8Block) {
    const uint32_t w = word_of(raw, i);
    FD_UNROLL
    for (int b = 0; b < 4; ++b) v[b] = e4m3_scaled(w, b);
  } else if constexpr (F == WeightFormat::Fp4Row) {
    e2m1x8_scaled(word_of(raw, i), v);
  } else if constexpr (F == WeightFormat::Bf16) {
    const uint32_t lo = word_of(raw, 2 * i), hi = word_of(raw, 2 * i + 1);
    v[0] = __uint_as_float(lo << 16);
    v[1] = __uint_as_float(lo & 0xFFFF0000u);
    v[2] = __uint_as_float(hi << 16);
    v[3] = __uint_as_float(hi & 0xFFFF0000u);
  } else {
    FD_UNROLL
    for (int j = 0; j < 4; ++j) v[j] = __uint_as_float(word_of(raw, j));
  }
  if constexpr (kExact && Chunk<F>::kCoded) {
    const float undo = Chunk<F>::kBias == 126 ? 0x1p126f : 0x1p120f;
    FD_UNROLL
    for (int j = 0; j < kGroupCols<F>; ++j) v[j] *= undo;
  }
}

// ---- activation staging -------------------------------------------------------------------------

// Float offset of staged column c in the lane-interleaved layout of chunks of VW columns.
template <int VW>
__device__ __forceinline__ int64_t staged_offset(int64_t c) {
  constexpr int W = 32 * VW;
  return (c / W) * W + ((c % VW) / 4) * 128 + ((c % W) / VW) * 4 + c % 4;
}

// Stages activation rows t < n, columns [0, cols) (row stride x_stride), into xs (row stride
// xs_stride floats, a multiple of 32 * VW) in the layout of staged_offset<VW>; columns from cols to
// the next multiple of 32 are zero. act_quant: each 32-column block quantised to E4M3 with its
// UE8M0 scale as docs/numerics.md says (values bit for bit the CPU's act_quant), times `factor`.
// Four lanes 8 apart share a block (8 columns each), so a warp covers 8 blocks per pass.
template <int VW>
__device__ void stage_rows(const float* x, int64_t x_stride, int64_t n, int64_t cols,
                           bool act_quant, float factor, float* xs, int64_t xs_stride) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t blocks = (cols + 31) / 32, groups = (blocks + 7) / 8;
  for (int64_t i = warp; i < n * groups; i += warps) {
    const int64_t t = i / groups, b = (i % groups) * 8 + (lane & 7u);
    const int64_t c0 = b * 32 + (lane >> 3) * 8;
    const float* src = x + t * x_stride + c0;
    float v[8];
    if (c0 + 8 <= cols && (reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
      const float4 a = reinterpret_cast<const float4*>(src)[0];
      const float4 c = reinterpret_cast<const float4*>(src)[1];
      const float got[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
      FD_UNROLL
      for (int e = 0; e < 8; ++e) v[e] = got[e];
    } else {
      FD_UNROLL
      for (int e = 0; e < 8; ++e) v[e] = c0 + e < cols ? src[e] : 0.0f;
    }
    float amax = 0.0f;
    FD_UNROLL
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e]));
    amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, 8));
    amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, 16));
    if (b >= blocks) continue;
    if (act_quant) {
      const float s = e8m0_to_f32(fp8_scale_code(amax)), sf = s * factor;
      e4m3_round_values(v, 1.0f / s);
      FD_UNROLL
      for (int e = 0; e < 8; ++e) v[e] *= sf;
    }
    float* row = xs + t * xs_stride;
    FD_UNROLL
    for (int h = 0; h < 2; ++h) {
      const float4 o = {v[4 * h], v[4 * h + 1], v[4 * h + 2], v[4 * h + 3]};
      *reinterpret_cast<float4*>(row + staged_offset<VW>(c0 + 4 * h)) = o;
    }
  }
}

// ---- rows times staged activations --------------------------------------------------------------

// R weight rows of one matrix or two (MoE gate and up) read by one warp.
template <int R>
struct WarpRows {
  const uint8_t* row[R];    // row starts; nullptr: no such row (past the matrix)
  const uint8_t* scale[R];  // the row's scale codes (FP8: its 32-row tile's), column block 0
  bool whole = false;       // every row present and 16-byte aligned (mark_whole)
};

// Sets rows.whole once a tile, so that load_step's common case skips the per-row checks.
template <int R>
__device__ __forceinline__ void mark_whole(WarpRows<R>& rows) {
  bool whole = true;
  FD_UNROLL
  for (int r = 0; r < R; ++r)
    whole =
        whole && rows.row[r] != nullptr && (reinterpret_cast<uintptr_t>(rows.row[r]) & 15u) == 0;
  rows.whole = whole;
}

template <WeightFormat F, int R>
__device__ __forceinline__ void load_step(const WarpRows<R>& w, int64_t k, int64_t col, uint4* raw,
                                          uint32_t* sc) {
  // Every row present and aligned, the lane's chunk inside the rows: straight wide loads. The
  // general path's checks, zeroing and narrow-load call were ~40% of the one-row FP8 GEMV's
  // instructions (its SASS on the H200: ~325 of ~815 a step).
  if (w.whole && col + Chunk<F>::VW <= k) {
    FD_UNROLL
    for (int r = 0; r < R; ++r) {
      raw[r] = load_streaming(w.row[r] + Chunk<F>::bytes(col));
      sc[r] = Chunk<F>::kCoded ? __ldg(w.scale[r] + col / 32) : 127u;
    }
    return;
  }
  FD_UNROLL
  for (int r = 0; r < R; ++r) {
    raw[r] = uint4{0, 0, 0, 0};
    sc[r] = 127;
    if (w.row[r] == nullptr || col >= k) continue;
    const bool aligned = (reinterpret_cast<uintptr_t>(w.row[r]) & 15u) == 0;
    raw[r] = load_chunk<F>(w.row[r], aligned, col, k);
    if constexpr (Chunk<F>::kCoded) sc[r] = __ldg(w.scale[r] + col / 32);
  }
}

// The staged values of columns [G i, G i + G) of the lane's chunk for activation row t.
template <int G>
__device__ __forceinline__ void staged_group(const float* xs, int64_t xs_stride, int t, int i,
                                             float* x) {
  FD_UNROLL
  for (int h = 0; h < G / 4; ++h) {
    const float4 v = *reinterpret_cast<const float4*>(xs + t * xs_stride + (i * G / 4 + h) * 128);
    x[4 * h] = v.x;
    x[4 * h + 1] = v.y;
    x[4 * h + 2] = v.z;
    x[4 * h + 3] = v.w;
  }
}

// acc[r * NT + t] += row r . staged row t over one chunk per lane (raw[r], block scale code sc[r]).
// Coded formats: the chunk's products are summed on their own, then scaled (kScaled: by the
// block scale times 2^(kBias - 40), for activations staged times 2^40; else by the block scale).
// The loops keep few values live: with few activation values a group, those are read first and
// each row's group is decoded and used at once; else the rows' groups are decoded first and each
// activation row's values read and used at once.
// kValues: FP8 decoded to the codes' values (decode_group), so the scaled form's scale undoes the
// staging's 2^40 only.
template <WeightFormat F, int R, int NT, bool kScaled, bool kValues = false>
__device__ __forceinline__ void add_step(const uint4* raw, const uint32_t* sc, const float* xs,
                                         int64_t xs_stride, int64_t n, float* acc) {
  using C = Chunk<F>;
  constexpr int G = kGroupCols<F>;
  float part[R * NT];
  float* sums = C::kCoded ? part : acc;  // exact products (coded formats): FMA changes nothing
  FD_UNROLL
  for (int i = 0; i < R * NT; ++i) part[i] = 0.0f;
  FD_UNROLL
  for (int i = 0; i < C::VW / G; ++i) {
    if constexpr (NT * G <= 16) {
      float x[NT][G] = {};  // rows t >= n are neither staged nor used
      FD_UNROLL
      for (int t = 0; t < NT; ++t)
        if (t < n) staged_group<G>(xs, xs_stride, t, i, x[t]);
      FD_UNROLL
      for (int r = 0; r < R; ++r) {
        float wv[G];
        decode_group<F, !kScaled, kValues>(raw[r], i, wv);
        FD_UNROLL
        for (int t = 0; t < NT; ++t) {
          if (t < n) {
            FD_UNROLL
            for (int j = 0; j < G; ++j) sums[r * NT + t] += x[t][j] * wv[j];
          }
        }
      }
    } else {
      float wv[R][G];
      FD_UNROLL
      for (int r = 0; r < R; ++r) decode_group<F, !kScaled, kValues>(raw[r], i, wv[r]);
      FD_UNROLL
      for (int t = 0; t < NT; ++t) {
        if (t < n) {
          float x[G];
          staged_group<G>(xs, xs_stride, t, i, x);
          FD_UNROLL
          for (int r = 0; r < R; ++r) {
            FD_UNROLL
            for (int j = 0; j < G; ++j) sums[r * NT + t] += x[j] * wv[r][j];
          }
        }
      }
    }
  }
  if constexpr (C::kCoded) {
    FD_UNROLL
    for (int r = 0; r < R; ++r) {
      float s = e8m0_to_f32(sc[r]);
      if constexpr (kScaled && kValues && kHasE4m3Conversion && F == WeightFormat::Fp8Block)
        s *= 0x1p-40f;
      else if constexpr (kScaled)
        s *= C::kBias == 126 ? 0x1p86f : 0x1p80f;  // 2^(kBias - 40)
      FD_UNROLL
      for (int t = 0; t < NT; ++t) acc[r * NT + t] += part[r * NT + t] * s;
    }
  }
}

// Stage kStage of warp_sum_many: values [0, N >> kStage) held, half of them handed to the lane
// 16 >> kStage away, which hands over the other half. Compile-time sizes keep v in registers.
template <int N, int kStage>
__device__ __forceinline__ void halve_sums(float* v, unsigned lane) {
  if constexpr ((N >> kStage) > 1) {
    constexpr int half = (N >> kStage) / 2, offset = 16 >> kStage;
    const bool upper = (lane & static_cast<unsigned>(offset)) != 0;
    FD_UNROLL
    for (int i = 0; i < half; ++i) {
      const float lo = v[i], hi = v[i + half];
      v[i] = (upper ? hi : lo) + __shfl_xor_sync(kFullMask, upper ? lo : hi, offset);
    }
    halve_sums<N, kStage + 1>(v, lane);
  }
}

// Sums of N = R * NT per-lane values over the warp (N a power of two, at most 32) in N - 1 + 5 -
// log2(N) shuffles instead of 5 N. Lane L ends with the total of value L / (32 / N), in the same
// order on every run.
template <int N>
__device__ __forceinline__ float warp_sum_many(float* v) {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "N must be a power of two up to 32");
  halve_sums<N, 0>(v, threadIdx.x & 31u);
  float s = v[0];
  FD_UNROLL
  for (int offset = 16 / N; offset > 0; offset /= 2) s += __shfl_xor_sync(kFullMask, s, offset);
  return s;
}

// One warp's rows against staged activation rows over staged columns [0, cols) (weight columns
// col0 + c): U chunks per lane per row in flight. `raw`/`sc` hold the first step, loaded by the
// caller (before staging, so the loads overlap it).
template <WeightFormat F, int R, int NT, int U, bool kScaled, bool kValues = false>
__device__ __forceinline__ void stream_rows(const WarpRows<R>& w, int64_t col0, int64_t k,
                                            int64_t cols, const float* xs, int64_t xs_stride,
                                            int64_t n, uint4 (&raw)[U][R], uint32_t (&sc)[U][R],
                                            float* acc) {
  using C = Chunk<F>;
  const int64_t lane_col = (threadIdx.x & 31u) * C::VW;
  const float* xl = xs + (threadIdx.x & 31u) * 4;
  for (int64_t step = 0; step * C::W < cols; step += U) {
    FD_UNROLL
    for (int u = 0; u < U; ++u) {
      const int64_t c = (step + u) * C::W + lane_col;
      if (c < cols)
        add_step<F, R, NT, kScaled, kValues>(raw[u], sc[u], xl + (step + u) * C::W, xs_stride, n,
                                             acc);
    }
    const int64_t next = step + U;
    if (next * C::W >= cols) break;
    FD_UNROLL
    for (int u = 0; u < U; ++u) {
      const int64_t c = (next + u) * C::W + lane_col;
      load_step<F, R>(w, k, c < cols ? col0 + c : k, raw[u], sc[u]);
    }
  }
}

// The first step's loads of stream_rows.
template <WeightFormat F, int R, int U>
__device__ __forceinline__ void first_step(const WarpRows<R>& w, int64_t col0, int64_t k,
                                           int64_t cols, uint4 (&raw)[U][R], uint32_t (&sc)[U][R]) {
  const int64_t lane_col = (threadIdx.x & 31u) * Chunk<F>::VW;
  FD_UNROLL
  for (int u = 0; u < U; ++u) {
    const int64_t c = u * Chunk<F>::W + lane_col;
    load_step<F, R>(w, k, c < cols ? col0 + c : k, raw[u], sc[u]);
  }
}

// A block's share of row tiles blockIdx.x, blockIdx.x + gridDim.x, ... (of `tiles`, more than
// blockIdx.x): the activation rows staged once by `stage()` while the first tile's loads are in
// flight, then for each tile this warp's rows `rows_of(tile)` streamed against them and the sums
// handed to `emit(tile, acc)` (acc[r * NT + t], per lane). Staging once for several tiles is what
// keeps its cost small next to the weights, from two activation rows on.
template <WeightFormat F, int R, int NT, int U, bool kScaled, bool kValues = false, class RowsOf,
          class Stage, class Emit>
__device__ __forceinline__ void stream_tiles(int64_t tiles, RowsOf&& rows_of, Stage&& stage,
                                             Emit&& emit, int64_t col0, int64_t k, int64_t cols,
                                             const float* xs, int64_t xs_stride, int64_t n) {
  int64_t tile = blockIdx.x;
  WarpRows<R> rows = rows_of(tile);
  uint4 raw[U][R];
  uint32_t sc[U][R];
  first_step<F, R, U>(rows, col0, k, cols, raw, sc);
  stage();
  __syncthreads();
  for (;;) {
    float acc[R * NT];
    FD_UNROLL
    for (int i = 0; i < R * NT; ++i) acc[i] = 0.0f;
    stream_rows<F, R, NT, U, kScaled, kValues>(rows, col0, k, cols, xs, xs_stride, n, raw, sc, acc);
    emit(tile, acc);
    tile += gridDim.x;
    if (tile >= tiles) break;
    rows = rows_of(tile);
    first_step<F, R, U>(rows, col0, k, cols, raw, sc);
  }
}

// One activation row: the warp's (tile, step) items (tiles blockIdx.x, + gridDim.x, ...; steps of
// 32 * VW columns) streamed as one sequence with U items' loads in flight, the next tile's loads
// issued while the current tile is summed and emitted. With one row the products are few, so what
// bounds the time is how many bytes are in flight without a gap: stream_tiles waits for each
// tile's first loads after the previous tile's sums (docs/cuda-backend.md "Kernels").
template <WeightFormat F, int R, int U, bool kScaled, bool kValues = false, class RowsOf,
          class Stage, class Emit>
__device__ __forceinline__ void stream_tiles_one_row(int64_t tiles, RowsOf&& rows_of, Stage&& stage,
                                                     Emit&& emit, int64_t col0, int64_t k,
                                                     int64_t cols, const float* xs) {
  using C = Chunk<F>;
  const int64_t steps = (cols + C::W - 1) / C::W, lane_col = (threadIdx.x & 31u) * C::VW;
  const float* xl = xs + (threadIdx.x & 31u) * 4;
  // The load cursor runs U items ahead of the sums.
  int64_t load_tile = blockIdx.x, load_step_index = 0;
  WarpRows<R> rows = rows_of(load_tile);
  auto load_next = [&](uint4* raw, uint32_t* sc) {
    if (load_tile >= tiles) return;
    const int64_t c = load_step_index * C::W + lane_col;
    load_step<F, R>(rows, k, c < cols ? col0 + c : k, raw, sc);
    if (++load_step_index == steps) {
      load_step_index = 0;
      load_tile += gridDim.x;
      if (load_tile < tiles) rows = rows_of(load_tile);
    }
  };
  uint4 raw[U][R];
  uint32_t sc[U][R];
  FD_UNROLL
  for (int u = 0; u < U; ++u) load_next(raw[u], sc[u]);
  stage();
  __syncthreads();
  int64_t tile = blockIdx.x, step = 0;
  float acc[R];
  FD_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  while (tile < tiles) {
    FD_UNROLL
    for (int u = 0; u < U; ++u) {
      if (tile >= tiles) break;  // the same for the whole warp
      if (step * C::W + lane_col < cols)
        add_step<F, R, 1, kScaled, kValues>(raw[u], sc[u], xl + step * C::W, 0, 1, acc);
      load_next(raw[u], sc[u]);
      if (++step == steps) {
        emit(tile, acc);
        FD_UNROLL
        for (int r = 0; r < R; ++r) acc[r] = 0.0f;
        step = 0;
        tile += gridDim.x;
      }
    }
  }
}

}  // namespace flashdesk::cuda
