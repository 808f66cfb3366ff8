// FP8 linears of 1 to 8 rows on the tensor cores (gemv_tc.cuh). A block has eight warps:
// warp w takes 16-row tile w / 4 of the block's 32 rows and quarter w % 4 of the block's K split
// (every fourth 64-column unit from unit w % 4 by default, else a quarter of its units in a run:
// UnitSeq in tc_codes.cuh),
// streaming its rows' weights through a ring of cp.async copies in shared memory (the decode
// experts' ring: 64 bytes of each of its 16 rows a unit, rows 80 bytes apart) and multiplying
// them, per 32-column block, as two mma.sync m16n8k16 with A = the 16 rows' E4M3 codes as FP16
// and B = the activation rows' E4M3 values as FP16, activation row t in column t (the columns past
// the rows zero). The block's K split of every activation row is staged in shared memory once
// (rows 16 bytes longer than the split, so the 8 rows' fragment reads fall on distinct banks). The
// quarters' sums meet in shared memory in quarter order.
//
// Grouped BF16 linears (wo_a, whose input is the attention's BF16 output) take the same form
// with BF16 products: A = the codes' exact values as BF16, B = the input rows as BF16 (staged from
// F32, where they are BF16 values already), no activation scale; group g (grid z) reads its
// rows' inputs at columns [g k, (g + 1) k) and writes its outputs at [g rows, (g + 1) rows).
#include <algorithm>

#include "engine/ops/cuda/async_copy.cuh"
#include "engine/ops/cuda/bf16_codes.cuh"
#include "engine/ops/cuda/gemv_tc.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/mma.cuh"
#include "engine/ops/cuda/no_padding.h"
#include "engine/ops/cuda/tc_codes.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTileRows = 16;  // an mma's rows
constexpr int kQuarters = 4;   // warps splitting a tile's K units
constexpr int kTiles = kWarps / kQuarters;
constexpr int kBlockRows = kTiles * kTileRows;  // 32
constexpr int kCols = 8;                        // an mma's columns: activation rows
constexpr int kUnitCols = 64;                   // FP8 columns of a unit: two 32-column blocks
constexpr int kRowBytes = 80;                   // a row's 64-byte unit in the ring, padded
constexpr int kUnitBytes = kTileRows * kRowBytes;
constexpr int kRing = 4;  // units a warp's ring holds (three in flight while one is used)
constexpr int kRingBytes = kWarps * kRing * kUnitBytes;  // 40 KiB a block
constexpr int kBlocksPerSm = 3;
constexpr int64_t kActBytes = 32 << 10;  // staged activation values a block, at most
constexpr float kUndo = 0x1p8f;          // e4m3x8_to_f16 gives the codes times 2^-8

FD_NO_PADDING_BEGIN
struct TcGemvArgs {
  const uint8_t* w;      // [rows, k] E4M3
  const uint8_t* scale;  // [rows / 32, scale_cols] UE8M0
  int64_t scale_cols, rows, k;
  int n;
  int round;
  int64_t interleave;  // a tile's K units to its warps interleaved (UnitSeq), else in ranges
  TcActs acts;         // [n, k] (act_quant'ed rows; BF16 linears: unused)
  const float* x;      // BF16 linears: the input rows [n, x_stride], group g at column g * k
  int64_t x_stride;    // (the groups are grid z; rows, y's columns and tile_done are a group's)
  int64_t k_split;     // columns a split (a multiple of kUnitCols)
  int64_t splits;
  float* y;  // [n, y_stride]
  int64_t y_stride;
  float* partial;  // splits > 1: [groups, splits, n, rows]
  unsigned* tile_done;
};
FD_NO_PADDING_END

// Eight FP8 (E4M3) codes (columns 8q .. 8q+3 in lo, 8q+4 .. 8q+7 in hi) as BF16 pairs of columns
// (i, i + 4), their exact values (every E4M3 value is a BF16 value).
__device__ __forceinline__ void e4m3x8_to_bf16_pairs(uint32_t lo, uint32_t hi, uint32_t (&r)[4]) {
  float vl[4], vh[4];
  e4m3x4_values(lo, vl);
  e4m3x4_values(hi, vh);
  FD_UNROLL
  for (int i = 0; i < 4; ++i) r[i] = bf16x2_rn(vl[i], vh[i]);
}

// acc[h][c] += row g + 8h of the warp's tile . activation row 2q + c (lane g = L / 4, q = L % 4),
// over the units us.at(0), us.at(1), ... of the split starting at column c0. row[h]: the two rows
// (null past the matrix); srow: their 32-row tile's scale codes. kBf16: the BF16 linears' form
// (the file's comment).
template <bool kBf16>
__device__ void tile_sums(const TcGemvArgs& a, const uint8_t* const (&row)[2], const uint8_t* srow,
                          int64_t c0, UnitSeq us, const uint16_t* act, int64_t act_stride,
                          const float* act_scale, int64_t scale_stride, uint8_t* ring,
                          float (&acc)[2][2]) {
  const unsigned lane = threadIdx.x & 31u, g = lane >> 2, q = lane & 3u;
  uint32_t sc[kRing];  // a unit's two block scale codes (byte j: block j)
  auto issue = [&](int slot, int64_t i) {
    if (i < us.count) {
      const int64_t u = us.at(i);
      FD_UNROLL
      for (int h = 0; h < 2; ++h) {
        uint8_t* dst = ring + slot * kUnitBytes + (h * 8 + g) * kRowBytes + q * 16;
        if (row[h] == nullptr)
          *reinterpret_cast<uint4*>(dst) = uint4{0u, 0u, 0u, 0u};
        else
          async_copy16(dst, row[h] + c0 + u * kUnitCols + q * 16);
      }
      const uint8_t* s = srow + (c0 + u * kUnitCols) / 32;
      sc[slot] = srow ? __ldg(s) | (static_cast<uint32_t>(__ldg(s + 1)) << 8) : 0x7F7Fu;
    }
    async_commit();  // an empty group past the end keeps the wait's count right
  };
  // The two columns' activation scales of a block (zero past the rows: their products are zero).
  const int t0 = static_cast<int>(2 * q), t1 = t0 + 1;
  FD_UNROLL
  for (int s = 0; s < kRing - 1; ++s) issue(s, s);
  for (int64_t base = 0; base < us.count; base += kRing) {
    FD_UNROLL
    for (int s = 0; s < kRing; ++s) {
      const int64_t i = base + s;
      if (i < us.count) {  // the same for the whole warp
        issue((s + kRing - 1) % kRing, i + kRing - 1);
        async_wait<kRing - 1>();  // this lane's copies of unit i have landed ...
        __syncwarp();             // ... and every lane's are visible
        const int64_t u = us.at(i);
        const uint8_t* unit = ring + s * kUnitBytes;
        FD_UNROLL
        for (int j = 0; j < 2; ++j) {
          const int64_t b = u * 2 + j;  // the block within the split
          uint4 bx = {0u, 0u, 0u, 0u};
          if (static_cast<int>(g) < a.n)
            bx = *reinterpret_cast<const uint4*>(act + g * act_stride + b * 32 + q * 8);
          // BF16 linears: no activation scale (their products past the rows are zero: B's
          // columns there are).
          const float sx0 = kBf16      ? 1.0f
                            : t0 < a.n ? act_scale[t0 * scale_stride + b] * kUndo
                                       : 0.0f;
          const float sx1 = kBf16      ? 1.0f
                            : t1 < a.n ? act_scale[t1 * scale_stride + b] * kUndo
                                       : 0.0f;
          const uint8_t* r0 = unit + g * kRowBytes;
          const uint8_t* r1 = r0 + 8 * kRowBytes;
          uint32_t w0[4], w1[4];  // rows g and g + 8: column pairs (i, i + 4)
          const uint2 v0 = *reinterpret_cast<const uint2*>(r0 + j * 32 + q * 8);
          const uint2 v1 = *reinterpret_cast<const uint2*>(r1 + j * 32 + q * 8);
          float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          if constexpr (kBf16) {
            e4m3x8_to_bf16_pairs(v0.x, v0.y, w0);
            e4m3x8_to_bf16_pairs(v1.x, v1.y, w1);
          } else {
            e4m3x8_to_f16(v0.x, v0.y, w0);
            e4m3x8_to_f16(v1.x, v1.y, w1);
          }
          const uint32_t a0[4] = {w0[0], w1[0], w0[1], w1[1]}, b0[2] = {bx.x, bx.y};
          const uint32_t a1[4] = {w0[2], w1[2], w0[3], w1[3]}, b1[2] = {bx.z, bx.w};
          if constexpr (kBf16) {
            mma_bf16_16816(d, a0, b0);
            mma_bf16_16816(d, a1, b1);
          } else {
            mma_f16_16816(d, a0, b0);
            mma_f16_16816(d, a1, b1);
          }
          const float sw = e8m0_to_f32((sc[s] >> (8 * j)) & 0xFFu);
          acc[0][0] += d[0] * (sw * sx0);
          acc[0][1] += d[1] * (sw * sx1);
          acc[1][0] += d[2] * (sw * sx0);
          acc[1][1] += d[3] * (sw * sx1);
        }
        __syncwarp();  // every lane done with the unit before its slot is refilled
      }
    }
  }
}

// Columns [c, c + 8) of input row `src` (F32, BF16 values) as BF16 bits in the B fragments' order
// (c0 c4 c1 c5 c2 c6 c3 c7, as quantize_block stores act_quant'ed values).
__device__ __forceinline__ uint4 bf16_fragment_octet(const float* src) {
  const float4 p = *reinterpret_cast<const float4*>(src);
  const float4 q = *reinterpret_cast<const float4*>(src + 4);
  return uint4{bf16x2_rn(p.x, q.x), bf16x2_rn(p.y, q.y), bf16x2_rn(p.z, q.z), bf16x2_rn(p.w, q.w)};
}

// grid (row tile pairs, K splits, groups).
template <bool kBf16>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) gemv_tc_kernel(TcGemvArgs a) {
  FD_GRID_PROLOGUE();
  __shared__ float quarter_sums[kTiles][kQuarters][kTileRows][kCols];
  // Dynamic: the warps' rings, then the split of each activation row (values, then scales).
  FD_DYNAMIC_SMEM(uint8_t, smem);
  const int64_t act_stride = a.k_split + 8, scale_stride = a.k_split / 32;
  uint16_t* act = reinterpret_cast<uint16_t*>(smem + kRingBytes);
  float* act_scale = reinterpret_cast<float*>(act + a.n * act_stride);
  const int64_t split = blockIdx.y, c0 = split * a.k_split, grp = blockIdx.z;
  const int64_t cols = lmin(a.k, c0 + a.k_split) - c0;  // a multiple of kUnitCols
  for (int64_t i = threadIdx.x; i < a.n * (cols / 8); i += kThreads) {
    const int64_t t = i / (cols / 8), c = i % (cols / 8) * 8;
    if constexpr (kBf16)
      *reinterpret_cast<uint4*>(act + t * act_stride + c) =
          bf16_fragment_octet(a.x + t * a.x_stride + grp * a.k + c0 + c);
    else
      async_copy16(act + t * act_stride + c, a.acts.values + t * a.k + c0 + c);
  }
  if constexpr (!kBf16) {
    for (int64_t i = threadIdx.x; i < a.n * (cols / 32); i += kThreads) {
      const int64_t t = i / (cols / 32), b = i % (cols / 32);
      act_scale[t * scale_stride + b] = a.acts.scales[t * (a.k / 32) + c0 / 32 + b];
    }
    async_commit();
    async_wait<0>();
  }
  __syncthreads();
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const int tl = static_cast<int>(warp) / kQuarters, quarter = static_cast<int>(warp) % kQuarters;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kTiles + tl;
  const UnitSeq us = warp_units(0, cols / kUnitCols, quarter, kQuarters, a.interleave != 0);
  float acc[2][2] = {};
  if (tile * kTileRows < a.rows) {
    const int64_t r0 = tile * kTileRows + lane / 4, w0 = grp * a.rows + r0;  // the weight's row
    const uint8_t* const row[2] = {r0 < a.rows ? a.w + w0 * a.k : nullptr,
                                   r0 + 8 < a.rows ? a.w + (w0 + 8) * a.k : nullptr};
    tile_sums<kBf16>(a, row, a.scale + (w0 / 32) * a.scale_cols, c0, us, act, act_stride, act_scale,
                     scale_stride, smem + warp * (kRing * kUnitBytes), acc);
  }
  FD_UNROLL
  for (int h = 0; h < 2; ++h) {
    FD_UNROLL
    for (int c = 0; c < 2; ++c)
      quarter_sums[tl][quarter][lane / 4 + 8 * h][2 * (lane % 4) + c] = acc[h][c];
  }
  __syncthreads();
  // Thread i: row i / 8 of the block, activation row i % 8.
  const int r = static_cast<int>(threadIdx.x) / kCols, t = static_cast<int>(threadIdx.x) % kCols;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kBlockRows + r;
  float sum = 0.0f;
  for (int s = 0; s < kQuarters; ++s) sum += quarter_sums[r / kTileRows][s][r % kTileRows][t];
  const bool mine_out = o < a.rows && t < a.n;
  float* const y = a.y + grp * a.rows;
  if (a.splits == 1) {
    if (mine_out) y[t * a.y_stride + o] = a.round ? round_bf16(sum) : sum;
    return;
  }
  float* const partial =
      a.partial + grp * a.splits * a.n * a.rows;  // the group's [splits, n, rows]
  if (mine_out) partial[(split * a.n + t) * a.rows + o] = sum;
  // The last block of this row pair's splits to arrive sums them in split order.
  __threadfence();
  __syncthreads();
  bool last = false;
  if (threadIdx.x == 0) {
    unsigned* count = a.tile_done + grp * gridDim.x + blockIdx.x;
    last = atomicAdd(count, 1u) == static_cast<unsigned>(a.splits - 1);
    if (last) *count = 0;
  }
  if (!__syncthreads_or(last)) return;
  __threadfence();
  if (!mine_out) return;
  float v = 0.0f;
  for (int64_t s = 0; s < a.splits; ++s) v += __ldcg(partial + (s * a.n + t) * a.rows + o);
  y[t * a.y_stride + o] = a.round ? round_bf16(v) : v;
}

}  // namespace

bool gemv_tc_fits(const GemvJob& job) {
  const LinearWeight& w = *job.w;
  const bool common = w.format == WeightFormat::Fp8Block && job.n >= 1 && job.n <= kCols &&
                      job.k % kUnitCols == 0 && w.scale.defined() && w.scale.dim(1) == job.k / 32 &&
                      reinterpret_cast<uintptr_t>(w.data.bytes()) % 16 == 0;
  if (!common) return false;
  if (job.act_quant) return job.groups == 1 && job.x_stride == job.k;
  // BF16 linears: the grouped ones (wo_a, whose input is the attention's BF16 output: what was
  // measured), a group's 16-row tiles within one 32-row scale tile, the rows read as float4.
  return job.groups > 1 && job.out_g % 32 == 0 && job.x_stride % 4 == 0 &&
         reinterpret_cast<uintptr_t>(job.x) % 16 == 0;
}

void gemv_tc(DeviceContext& ctx, const GemvJob& job) {
  const LinearWeight& w = *job.w;
  const int64_t n = job.n, k = job.k, rows = job.out_g, groups = job.groups;
  const bool bf16 = !job.act_quant;
  TcActs acts{};
  Tensor xv, xs;
  if (!bf16) {
    xv = ctx.scratch(DType::BF16, Shape{n, k});  // FP16 bits (2 bytes a value)
    xs = ctx.scratch(DType::F32, Shape{n, k / 32});
    acts = TcActs{ptr<uint16_t>(xv), ptr<float>(xs)};
    quantize_acts_tc(ctx, job.x, n, k, acts);
  }
  // K splits: at most one wave of resident blocks (1.2 waves, from rounding the splits up, ran wo_b
  // at 37.5 µs against the CUDA cores' 26.3), whole units a split, and the split's activation
  // rows within the staging budget.
  const int64_t pairs = (rows + kBlockRows - 1) / kBlockRows, units = k / kUnitCols;
  const int64_t capacity = static_cast<int64_t>(ctx.multiprocessors()) * kBlocksPerSm;
  const int64_t budget_units = (kActBytes / (2 * n) - 8) / kUnitCols;
  int64_t splits = std::clamp<int64_t>(capacity / (pairs * groups), 1, units);
  int64_t split_units = (units + splits - 1) / splits;
  split_units = std::max<int64_t>(1, std::min(split_units, budget_units));
  splits = (units + split_units - 1) / split_units;
  TcGemvArgs a{};
  a.w = w.data.bytes();
  a.scale = w.scale.bytes();
  a.scale_cols = w.scale.dim(1);
  a.rows = rows;
  a.k = k;
  a.n = static_cast<int>(n);
  a.acts = acts;
  a.x = job.x;
  a.x_stride = job.x_stride;
  a.k_split = split_units * kUnitCols;
  a.splits = splits;
  a.y = job.y;
  a.y_stride = job.y_stride;
  a.round = job.round_bf16 ? 1 : 0;
  a.interleave = ctx.interleaved_units() ? 1 : 0;
  Tensor partial;
  if (splits > 1) {
    partial = ctx.scratch(DType::F32, Shape{groups, splits, n, rows});
    a.partial = ptr<float>(partial);
    a.tile_done = ctx.arrival_counters(groups * pairs);
  }
  const int64_t smem = kRingBytes + n * (a.k_split + 8) * 2 + (bf16 ? 0 : n * (a.k_split / 32) * 4);
  const dim3 grid(static_cast<unsigned>(pairs), static_cast<unsigned>(splits),
                  static_cast<unsigned>(groups));
  const auto launch = [&]<bool kBf16>() {
    allow_dynamic_smem<gemv_tc_kernel<kBf16>>(static_cast<size_t>(smem));
    FD_LAUNCH(gemv_tc_kernel<kBf16>, grid, dim3(kThreads), static_cast<size_t>(smem), ctx.stream(),
              a);
  };
  if (bf16)
    launch.template operator()<true>();
  else
    launch.template operator()<false>();
}

}  // namespace flashdesk::cuda
