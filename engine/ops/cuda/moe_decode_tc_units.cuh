// The pieces of the decode experts' tensor-core kernels (moe_decode_tc.cu): the weights' units
// streamed through a per-warp cp.async ring into m16n8k16 products (tile_sums), the lanes' rows,
// and the up kernel's SwiGLU of a 32-row block of h.
#pragma once

#include <cstdint>

#include "engine/ops/cuda/async_copy.cuh"
#include "engine/ops/cuda/gemv_device.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/mma.cuh"
#include "engine/ops/cuda/moe_slots.cuh"
#include "engine/ops/cuda/tc_codes.cuh"

namespace flashdesk::cuda::decode_tc {

constexpr int kTileRows = 16;  // an mma's rows
constexpr int kQuarters = 4;   // the up kernel's warps splitting a tile's K units
constexpr int kTilesPerBlock = 2;
constexpr int kBlockRows = kTilesPerBlock * kTileRows;  // 32: one K block of h for the down kernel
constexpr int64_t kMaxTcCols = 8192;

// The weights reach shared memory in units of 64 bytes of each of the warp's rows (FP4: 4 K
// blocks, FP8: 2): lane L copies bytes 16 (L%4) .. of row L/4 (+ 8) with cp.async, coalesced, and
// a ring of Ring units keeps Ring - 1 of them in flight while the warp multiplies an earlier one.
// Reading 4 or 8 bytes a lane straight from global memory in the fragments' order scattered each
// load over 8 rows (the L1 requests, not the bytes, bound it). Rows sit 80 bytes apart, so the
// fragments' 4-byte reads hit distinct banks. The up kernel: several rows three blocks a
// multiprocessor (at most 85 registers a thread) with rings 3 units deep (60 KiB a block), one row
// four blocks (64 registers) with rings 2 deep. The down kernel (blocks of four warps, rings 4
// deep, 20 KiB): six blocks a multiprocessor at several rows, eight at one.
constexpr int kRowBytes = 80;
template <int M>
constexpr int unit_bytes() {  // one unit of a warp's rows: [m][h][row L/4]
  return M * 2 * 8 * kRowBytes;
}
// The rings' depth (units a warp holds) and the blocks a multiprocessor are a kernel's template
// parameters (launch_experts_tc picks them by the rows).
template <int M>
constexpr int ring_bytes(int ring, int warps) {  // a block's rings
  return warps * ring * unit_bytes<M>();
}

// What a lane reads of each of M matrices: the rows it copies into the ring (copy_row() and
// copy_row() + 8 of a tile) and the scale rows of the two rows whose sums it holds (L/4 and L/4 +
// 8); null past the matrix. The copies go chunk-major: lane L copies the 16-byte chunk L/8 of row
// L%8, so a copy's eight lanes of one shared-memory phase write one chunk of eight rows 80 bytes
// apart, on distinct banks. Row-major (row L/4, chunk L%4) two rows' chunks met on a bank in every
// phase (Nsight Compute: 51% of the up kernel's shared wavefronts in excess).
template <int M>
struct LaneRows {
  const uint8_t* row[M][2];
  const uint8_t* scale[M][2];
};
__device__ __forceinline__ unsigned copy_row() {
  return threadIdx.x % 8u;
}
__device__ __forceinline__ unsigned copy_chunk() {
  return (threadIdx.x % 32u) / 8u;
}

template <WeightFormat F>
constexpr bool kTcFormat = F == WeightFormat::Fp4Row || F == WeightFormat::Fp8Block;

// acc[m][h] += the tile's sums of matrix m, row L/4 + 8h, over the K units us.at(0), us.at(1),
// ... (meaningful in lanes L%4 == 0: column 0 of D), against the activation row `act` (values,
// scales). `ready()` runs once the first units' copies are issued (every warp of the block calls
// it, with or without units: it holds the block barrier after which the activation row may be
// read).
template <WeightFormat F, int M, int Ring, class Ready>
__device__ void tile_sums(const LaneRows<M>& lr, UnitSeq us, const uint16_t* act,
                          const float* act_scale, uint8_t* ring, float (&acc)[M][2],
                          Ready&& ready) {
  constexpr bool kFp4 = F == WeightFormat::Fp4Row;
  constexpr int kBlocks = kFp4 ? 4 : 2;             // K blocks a unit
  constexpr float kUndo = kFp4 ? 0x1p14f : 0x1p8f;  // the decoders' power of two
  const unsigned lane = threadIdx.x & 31u, g = lane >> 2, q = lane & 3u;
  const bool column0 = lane < 4;  // the lanes holding B's column 0 (the activation row)
  // The rows' block scale codes of a unit, byte j for block j (FP4: a code a row and block; FP8:
  // the 32-row tile's, the same for rows L/4 and L/4 + 8).
  uint32_t sc[Ring][M][2];
  auto issue = [&](int slot, int64_t i) {
    if (i < us.count) {
      const int64_t u = us.at(i);
      FD_UNROLL
      for (int m = 0; m < M; ++m) {
        FD_UNROLL
        for (int h = 0; h < 2; ++h) {
          uint8_t* dst = ring + slot * unit_bytes<M>() +
                         ((m * 2 + h) * 8 + copy_row()) * kRowBytes + copy_chunk() * 16;
          const uint8_t* r = lr.row[m][h];
          if (r != nullptr)
            async_copy16(dst, r + u * 64 + copy_chunk() * 16);
          else
            *reinterpret_cast<uint4*>(dst) = uint4{0u, 0u, 0u, 0u};
          if (lr.scale[m][h] == nullptr) {
            sc[slot][m][h] = 0x7F7F7F7Fu;
            continue;
          }
          const uint8_t* s = lr.scale[m][h] + u * kBlocks;
          if constexpr (kFp4)
            sc[slot][m][h] = __ldg(reinterpret_cast<const uint32_t*>(s));
          else
            sc[slot][m][h] = __ldg(s) | (static_cast<uint32_t>(__ldg(s + 1)) << 8);
        }
      }
    }
    async_commit();  // an empty group past the end keeps the wait's count right
  };
  FD_UNROLL
  for (int s = 0; s < Ring - 1; ++s) issue(s, s);
  ready();
  for (int64_t base = 0; base < us.count; base += Ring) {
    FD_UNROLL
    for (int s = 0; s < Ring; ++s) {
      const int64_t i = base + s;
      if (i < us.count) {  // the same for the whole warp
        issue((s + Ring - 1) % Ring, i + Ring - 1);
        async_wait<Ring - 1>();  // this lane's copies of unit i have landed ...
        __syncwarp();            // ... and every lane's are visible
        const int64_t u = us.at(i);
        const uint8_t* unit = ring + s * unit_bytes<M>();
        FD_UNROLL
        for (int j = 0; j < kBlocks; ++j) {
          const int64_t b = u * kBlocks + j;
          uint4 bx = {0u, 0u, 0u, 0u};
          if (column0) bx = *reinterpret_cast<const uint4*>(act + b * 32 + q * 8);
          const float sx = act_scale[b] * kUndo;
          FD_UNROLL
          for (int m = 0; m < M; ++m) {
            const uint8_t* r0 = unit + ((m * 2) * 8 + g) * kRowBytes;
            const uint8_t* r1 = r0 + 8 * kRowBytes;
            uint32_t w0[4], w1[4];  // rows L/4 and L/4 + 8: column pairs (i, i + 4)
            if constexpr (kFp4) {
              e2m1x8_to_f16(*reinterpret_cast<const uint32_t*>(r0 + j * 16 + q * 4), w0);
              e2m1x8_to_f16(*reinterpret_cast<const uint32_t*>(r1 + j * 16 + q * 4), w1);
            } else {
              const uint2 v0 = *reinterpret_cast<const uint2*>(r0 + j * 32 + q * 8);
              const uint2 v1 = *reinterpret_cast<const uint2*>(r1 + j * 32 + q * 8);
              e4m3x8_to_f16(v0.x, v0.y, w0);
              e4m3x8_to_f16(v1.x, v1.y, w1);
            }
            float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const uint32_t a0[4] = {w0[0], w1[0], w0[1], w1[1]}, b0[2] = {bx.x, bx.y};
            const uint32_t a1[4] = {w0[2], w1[2], w0[3], w1[3]}, b1[2] = {bx.z, bx.w};
            mma_f16_16816(d, a0, b0);
            mma_f16_16816(d, a1, b1);
            acc[m][0] += d[0] * (e8m0_to_f32((sc[s][m][0] >> (8 * j)) & 0xFFu) * sx);
            acc[m][1] += d[2] * (e8m0_to_f32((sc[s][m][1] >> (8 * j)) & 0xFFu) * sx);
          }
        }
        __syncwarp();  // every lane done with the unit before its slot is refilled
      }
    }
  }
}

// Row `row` of matrix m of an expert, and its scale row (FP8: its 32-row tile's); null past rows.
__device__ __forceinline__ void lane_row(const ExpertEntry& ex, int m, int64_t row, int64_t rows,
                                         int64_t k, const uint8_t** data, const uint8_t** scale) {
  const bool fp4 = static_cast<WeightFormat>(ex.format[m]) == WeightFormat::Fp4Row;
  *data = row < rows ? ex.data[m] + row * (fp4 ? k / 2 : k) : nullptr;
  *scale = row < rows ? ex.scale[m] + (fp4 ? row : row / 32) * ex.scale_cols[m] : nullptr;
}
// Shared memory of an activation row of k values (FP16 values, F32 block scales).
constexpr int act_bytes(int64_t k) {
  return static_cast<int>(k * 2 + k / 32 * 4);
}

// Warp 0 of an up block, lane L holding the gate and up sums (sum[0], sum[1]) of row 32 pair + L
// of slot `slot` (expert e, routing weight `weight`, `rows` rows): as the CUDA-core up kernel,
// gate and up rounded to BF16, clamped, SwiGLU, times the routing weight, then the down kernel's
// act_quant of this 32-column block of h (every lane takes part).
__device__ __forceinline__ void swiglu_block(const SlotArgs& a, int64_t e, float weight,
                                             int64_t rows, int64_t pair, int64_t slot,
                                             const float (&sum)[2], TcActs h, int64_t h_stride) {
  const int64_t i = pair * kBlockRows + (threadIdx.x & 31u);
  float g = round_bf16(sum[0]), u = round_bf16(sum[1]);
  if (a.limit > 0.0f) {
    u = fminf(fmaxf(u, -a.limit), a.limit);
    g = fminf(g, a.limit);
  }
  float v = __fmul_rn(g / (1.0f + expf(-g)), u);
  if (e != a.n_routed) v = __fmul_rn(v, weight);
  v = i < rows ? round_bf16(v) : 0.0f;
  quantize_block(v, h.values + slot * h_stride + pair * kBlockRows,
                 h.scales + slot * (h_stride / 32) + pair);
}

}  // namespace flashdesk::cuda::decode_tc
