// The one-row FP8 GEMV on bulk copies (gemv_bulk.cuh says when it runs).
//
// Why: the register-load GEMV (gemv_device.cuh) keeps a warp's loads in flight only between its
// products (load, wait, multiply, load), so its bytes in flight dip at every step and wq_b, wo_b
// and wo_a read at 1.2-2.0 TB/s against the copy's 3.0 on an H100 (docs/cuda-backend.md). Here
// each warp owns a contiguous range of rows (contiguous bytes in memory) cut into pieces of at
// most kMaxPiece bytes, and its lane 0 keeps `depth` pieces in flight by bulk copies into the
// warp's ring in shared memory; a piece's slot is refilled once the warp has multiplied it.
//
// The numerics are linear.cu's one-row kValues form: a lane's 16 codes (one chunk) times the
// staged activations summed on their own, scaled by the block scale, added to the lane's row sum
// in chunk order; the warp's sum of its lanes (warp_sum) ends the row. Only the order of the FP32
// sums differs from the CPU reference (docs/numerics.md "Linear layers").
#include <algorithm>

#include "engine/ops/cuda/async_copy.cuh"
#include "engine/ops/cuda/bulk_copy.cuh"
#include "engine/ops/cuda/device_numeric.cuh"
#include "engine/ops/cuda/gemv_bulk.cuh"
#include "engine/ops/cuda/gemv_device.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/no_padding.h"

namespace flashdesk::cuda {
namespace {

constexpr int kBulkWarps = 8;
constexpr int kBulkThreads = 32 * kBulkWarps;
constexpr int kWarpStep = 32 * 16;  // bytes (= FP8 columns) a warp multiplies at once

FD_NO_PADDING_BEGIN
struct BulkGemvParams {
  const float* x;  // the activation row; group g reads columns [g k, (g + 1) k)
  const uint8_t* w;
  const uint8_t* scale;  // UE8M0 codes of 32 x 32 tiles, scale_cols a tile row
  int64_t scale_cols, out_g, k;
  int64_t piece;  // columns of a ring slot's rows: k, or a multiple of kWarpStep when k is longer
  int64_t xs_floats;  // the staged row's floats (a multiple of kWarpStep)
  float* y;
  int depth;            // ring slots a warp
  int warps_per_group;  // warps sharing a group's units of R rows
  int act_quant;
  int round;
  int probe;       // PROBE
  int interleave;  // PROBE: warp w takes units w, w + W, ... (else a contiguous range)
};
FD_NO_PADDING_END

// Shared memory: the staged row, then the warps' barriers, then their rings (slots of R rows).
__host__ __device__ inline int64_t barrier_bytes(int depth) {
  return (int64_t{8} * kBulkWarps * depth + 127) / 128 * 128;
}
inline int64_t bulk_smem_bytes(int64_t xs_floats, int depth, int64_t slot) {
  return xs_floats * 4 + barrier_bytes(depth) + int64_t{kBulkWarps} * depth * slot;
}

// Warp steps a slot's row holds at most: R rows' block scales of a piece stay in registers.
template <int R>
constexpr int kMaxSteps = R >= 4 ? 4 : 8;

// R weight rows a unit (the products of a column step share the activations' loads): a warp
// streams its units' pieces through its ring, each slot R rows of `piece` columns.
// kScaled: act_quant'ed activations against the codes (linear.cu's scaled form), else plain ones.
// kLaneDepth 0: lane 0's bulk copies fill a slot; else every lane copies the 16-byte chunks it
// multiplies itself (cp.async), the ring kLaneDepth slots deep (p.depth).
template <int R, bool kScaled, int kLaneDepth>
__global__ void __launch_bounds__(kBulkThreads) gemv_bulk_kernel(BulkGemvParams p) {
#if FD_HAVE_BULK_COPY
  constexpr WeightFormat F = WeightFormat::Fp8Block;
  constexpr int kSteps = kMaxSteps<R>;
  FD_DYNAMIC_SMEM(float, xs);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const int64_t slot_bytes = R * p.piece;
  unsigned char* after_row = reinterpret_cast<unsigned char*>(xs + p.xs_floats);
  uint64_t* bars = reinterpret_cast<uint64_t*>(after_row) + warp * p.depth;
  uint8_t* ring = after_row + barrier_bytes(p.depth) + int64_t{warp} * p.depth * slot_bytes;
  const int64_t g = blockIdx.y, units = (p.out_g + R - 1) / R;
  const int64_t warp_index = int64_t{blockIdx.x} * kBulkWarps + warp;
  const int64_t u0 = p.interleave ? warp_index : units * warp_index / p.warps_per_group,
                u1 = p.interleave ? units : units * (warp_index + 1) / p.warps_per_group,
                u_step = p.interleave ? p.warps_per_group : 1;
  const int pieces = static_cast<int>((p.k + p.piece - 1) / p.piece);
  const uint8_t* group_w = p.w + g * p.out_g * p.k;
  // Lane 0's cursor: the next unit and piece to copy, into the slot the warp has just freed.
  int64_t next_unit = u0;
  int next_part = 0;
  const auto copy_next = [&](int slot) {
    if (next_unit >= u1 || p.probe == 3) return;
    const int64_t o0 = next_unit * R, off = int64_t{next_part} * p.piece;
    const int rows = static_cast<int>(lmin(R, p.out_g - o0));
    const auto len = static_cast<uint32_t>(lmin(p.piece, p.k - off));
    uint8_t* dst = ring + slot * slot_bytes;
    const uint8_t* src = group_w + o0 * p.k + off;
    if constexpr (kLaneDepth == 0) {
      uint64_t* bar = bars + slot;
      barrier_expect(bar, len * rows);
      if (pieces == 1) {
        bulk_copy(dst, src, len * rows, bar);  // the rows are contiguous, as in the slot
      } else {
        for (int r = 0; r < rows; ++r) bulk_copy(dst + r * p.piece, src + r * p.k, len, bar);
      }
    } else {
      FD_UNROLL
      for (int r = 0; r < R; ++r) {
        FD_UNROLL
        for (int s = 0; s < kMaxSteps<R>; ++s) {
          const int j = s * kWarpStep + static_cast<int>(lane) * 16;
          if (r < rows && j < static_cast<int>(len))
            async_copy16(dst + r * p.piece + j, src + r * p.k + j);
        }
      }
    }
    if (++next_part == pieces) next_part = 0, next_unit += u_step;
  };
  // Bulk copies: lane 0 fills a slot. Lane copies: every lane its own chunks, a group a slot
  // (empty past the warp's last piece, so that the count of groups behind stays kLaneDepth - 1).
  const auto issue = [&](int slot) {
    if constexpr (kLaneDepth == 0) {
      if (lane == 0) copy_next(slot);
    } else {
      copy_next(slot);
      async_commit();
    }
  };
  // Weights are never written: the first pieces go out before the wait for the kernel that wrote
  // x, overlapping its end (cuda_compat.cuh).
  fd_allow_dependents();
  if constexpr (kLaneDepth == 0) {
    if (lane == 0) {
      for (int s = 0; s < p.depth; ++s) barrier_init(bars + s);
      barrier_init_fence();
    }
  }
  for (int s = 0; s < p.depth; ++s) issue(s);
  __syncwarp();
  fd_wait_prior_grid();
  stage_rows<16>(p.x + g * p.k, 0, 1, p.k, p.act_quant != 0, kScaled ? kStageFactor : 1.0f, xs,
                 p.xs_floats);
  __syncthreads();
  int slot = 0;
  uint32_t phase = 0;
  for (int64_t unit = u0; unit < u1; unit += u_step) {
    const int64_t o0 = unit * R;
    const int rows = static_cast<int>(lmin(R, p.out_g - o0));
    const uint8_t* scale_rows[R];
    FD_UNROLL
    for (int r = 0; r < R; ++r)
      scale_rows[r] = p.scale + ((g * p.out_g + o0 + (r < rows ? r : 0)) / 32) * p.scale_cols;
    float acc[R];
    FD_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    for (int part = 0; part < pieces; ++part) {
      const int64_t off = int64_t{part} * p.piece;
      const int len = static_cast<int>(lmin(p.piece, p.k - off));
      // The lane's block scales first: their loads are in flight during the wait.
      uint32_t sc[kSteps][R];
      FD_UNROLL
      for (int s = 0; s < kSteps; ++s) {
        const int j = s * kWarpStep + static_cast<int>(lane) * 16;
        FD_UNROLL
        for (int r = 0; r < R; ++r)
          sc[s][r] = j < len && p.probe == 0 ? __ldg(scale_rows[r] + (off + j) / 32) : 127u;
      }
      if constexpr (kLaneDepth == 0) {
        if (p.probe != 3) barrier_wait(bars + slot, phase);
      } else {
        async_wait<kLaneDepth - 1>();  // this lane's copies of the slot landed
      }
      const uint8_t* piece_rows = ring + slot * slot_bytes;
      FD_UNROLL
      for (int s = 0; s < kSteps; ++s) {
        const int j = s * kWarpStep + static_cast<int>(lane) * 16;  // the lane's byte of a row
        if (j < len && p.probe != 1) {
          uint4 raw[R];
          FD_UNROLL
          for (int r = 0; r < R; ++r)
            raw[r] = r < rows ? *reinterpret_cast<const uint4*>(piece_rows + r * p.piece + j)
                              : uint4{0, 0, 0, 0};
          add_step<F, R, 1, kScaled, true>(raw, sc[s], xs + off + s * kWarpStep + lane * 4, 0, 1,
                                           acc);
        }
      }
      // Bulk copies: every lane's reads of the slot done before lane 0 refills it (a lane refills
      // only the bytes it has read itself).
      if constexpr (kLaneDepth == 0) __syncwarp();
      issue(slot);
      if (++slot == p.depth) slot = 0, phase ^= 1u;
    }
    // Lane L holds the total of row L / (32 / R) (warp_sum_many).
    const float v = warp_sum_many<R>(acc);
    const int r = static_cast<int>(lane) / (32 / R);
    if (static_cast<int>(lane) % (32 / R) == 0 && r < rows)
      p.y[g * p.out_g + o0 + r] = p.round ? round_bf16(v) : v;
  }
#else
  (void)p;
#endif
}

struct BulkShape {
  int rows = 0, depth = 0;
  bool lane_copies = false;
  int64_t piece = 0, xs_floats = 0, smem = 0;
};

// The deepest ring up to the asked depth (at least 2 slots) that fits the device's shared memory.
BulkShape bulk_shape(const DeviceContext& ctx, const GemvJob& job) {
  const GemvBulkShape want = ctx.gemv_bulk_shape();
  BulkShape s;
  s.rows = want.rows;
  s.lane_copies = want.lane_copies;
  const int64_t most = std::min<int64_t>(
      want.piece, int64_t{kWarpStep} * (want.rows >= 4 ? kMaxSteps<4> : kMaxSteps<1>));
  s.piece = job.k <= most ? job.k : most;
  s.xs_floats = (job.k + kWarpStep - 1) / kWarpStep * kWarpStep;
  const auto limit = static_cast<int64_t>(ctx.props().sharedMemPerBlockOptin);
  for (int depth = s.lane_copies ? std::min(want.depth, 4) : want.depth; depth >= 2; --depth) {
    const int64_t smem = bulk_smem_bytes(s.xs_floats, depth, s.rows * s.piece);
    if (smem <= limit) {
      s.depth = depth;
      s.smem = smem;
      return s;
    }
  }
  return s;
}

bool device_has_bulk_copies(const DeviceContext& ctx) {
#ifdef FLASHDESK_CUDA_EMU
  (void)ctx;
  return true;
#else
  return ctx.props().major >= 9;
#endif
}

template <int R, bool kScaled>
void launch(DeviceContext& ctx, const GemvJob& job, const BulkShape& s) {
  const LinearWeight& w = *job.w;
  const int per_sm = std::clamp(
      static_cast<int>(static_cast<int64_t>(ctx.props().sharedMemPerBlockOptin) / s.smem), 1,
      ctx.gemv_bulk_shape().blocks_per_sm);
  // About one wave of blocks over the groups, each warp at least one unit of R rows.
  const int64_t wave = int64_t{ctx.multiprocessors()} * per_sm;
  const int64_t units = (job.out_g + R - 1) / R;
  const int64_t blocks =
      std::clamp<int64_t>(wave / job.groups, 1, (units + kBulkWarps - 1) / kBulkWarps);
  BulkGemvParams p{};
  p.x = job.x;
  p.w = w.data.bytes();
  p.scale = w.scale.bytes();
  p.scale_cols = w.scale.dim(1);
  p.out_g = job.out_g;
  p.k = job.k;
  p.piece = s.piece;
  p.xs_floats = s.xs_floats;
  p.y = job.y;
  p.depth = s.depth;
  p.warps_per_group = static_cast<int>(blocks * kBulkWarps);
  p.act_quant = job.act_quant ? 1 : 0;
  p.round = job.round_bf16 ? 1 : 0;
  static const int probe = getenv("FD_BULK_PROBE") ? atoi(getenv("FD_BULK_PROBE")) : 0;
  p.probe = probe;
  static const int interleave =
      getenv("FD_BULK_INTERLEAVE") ? atoi(getenv("FD_BULK_INTERLEAVE")) : 0;
  p.interleave = interleave;
  const auto go = [&]<int kLaneDepth>() {
    allow_dynamic_smem<gemv_bulk_kernel<R, kScaled, kLaneDepth>>(static_cast<size_t>(s.smem));
    FD_LAUNCH((gemv_bulk_kernel<R, kScaled, kLaneDepth>),
              dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(job.groups)),
              dim3(kBulkThreads), static_cast<size_t>(s.smem), ctx.stream(), p);
  };
  if (!s.lane_copies) return go.template operator()<0>();
  if (s.depth == 2) return go.template operator()<2>();
  if (s.depth == 3) return go.template operator()<3>();
  go.template operator()<4>();
}

template <bool kScaled>
void launch_rows(DeviceContext& ctx, const GemvJob& job, const BulkShape& s) {
  if (s.rows == 1) return launch<1, kScaled>(ctx, job, s);
  if (s.rows == 2) return launch<2, kScaled>(ctx, job, s);
  launch<4, kScaled>(ctx, job, s);
}

}  // namespace

bool gemv_bulk_fits(const DeviceContext& ctx, const GemvJob& job) {
  const LinearWeight& w = *job.w;
  return device_has_bulk_copies(ctx) && w.format == WeightFormat::Fp8Block && job.n == 1 &&
         w.scale.defined() && job.k % 16 == 0 && job.k > 0 && job.out_g > 0 &&
         (reinterpret_cast<uintptr_t>(w.data.bytes()) & 15u) == 0 &&
         bulk_shape(ctx, job).depth >= 2;
}

void gemv_bulk(DeviceContext& ctx, const GemvJob& job) {
  const BulkShape s = bulk_shape(ctx, job);
  if (job.act_quant)
    launch_rows<true>(ctx, job, s);
  else
    launch_rows<false>(ctx, job, s);
}

}  // namespace flashdesk::cuda
