// Weight dequantisation to BF16 (dequant.cuh). The prefill path runs it for every expert of a
// layer (384 x 3 matrices), so it must move bytes near the copy bandwidth: a thread reads a word
// of codes and writes eight BF16 values at once, four times; the one-value-a-thread form (127 GB/s
// on the H200, over half of a 2048-token prefill's device time) remains for odd widths.
#include "engine/ops/cuda/dequant.cuh"
#include "engine/ops/cuda/kernel_util.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kGroupsPerThread = 4;  // groups of 8 values a thread converts

// Threads of a block convert groups of 8 values of a row (k % 8 == 0), kGroupsPerThread groups
// each, a block's threads on consecutive groups at each step (coalesced loads and stores): FP8
// codes as one 8-byte word with one 32x32 block scale, FP4 codes as one 4-byte word with one
// per-32 row scale. 32-bit index arithmetic (the host checks the count fits): with one group a
// thread and a 64-bit division per group, the index arithmetic was most of what the kernel issued
// and the H200 moved 1.5 TB/s here.
template <bool Fp4>
__global__ void __launch_bounds__(kThreads)
    dequantize_by_eight_kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale,
                               uint32_t scale_cols, uint32_t rows, uint32_t k,
                               uint4* __restrict__ out) {
  FD_GRID_PROLOGUE();
  const uint32_t per_row = k / 8, total = rows * per_row;
  const uint32_t base = blockIdx.x * (kThreads * kGroupsPerThread) + threadIdx.x;
  // Every group's loads first, then the conversions and stores: loads behind stores the compiler
  // cannot reorder would wait on memory one group at a time.
  uint2 codes[kGroupsPerThread];
  uint32_t sc[kGroupsPerThread];
  FD_UNROLL
  for (int step = 0; step < kGroupsPerThread; ++step) {
    const uint32_t i = base + static_cast<uint32_t>(step) * kThreads;
    codes[step] = uint2{0, 0};
    sc[step] = 0;
    if (i >= total) continue;
    const uint32_t r = i / per_row, c = (i - r * per_row) * 8;
    if constexpr (Fp4) {
      codes[step].x = load_aligned<uint32_t>(w + static_cast<size_t>(r) * (k / 2) + c / 2);
      sc[step] = scale[static_cast<size_t>(r) * scale_cols + c / 32];
    } else {
      codes[step] = load_aligned<uint2>(w + static_cast<size_t>(r) * k + c);
      sc[step] = scale[static_cast<size_t>(r / 32) * scale_cols + c / 32];
    }
  }
  FD_UNROLL
  for (int step = 0; step < kGroupsPerThread; ++step) {
    const uint32_t i = base + static_cast<uint32_t>(step) * kThreads;
    if (i >= total) continue;
    const float s = e8m0_to_f32(sc[step]);
    float v[8];
    if constexpr (Fp4) {
      FD_UNROLL
      for (int j = 0; j < 8; ++j) v[j] = e2m1_to_f32((codes[step].x >> (4 * j)) & 0xFu) * s;
    } else {
      FD_UNROLL
      for (int j = 0; j < 4; ++j) {
        v[j] = e4m3_to_f32((codes[step].x >> (8 * j)) & 0xFFu) * s;
        v[4 + j] = e4m3_to_f32((codes[step].y >> (8 * j)) & 0xFFu) * s;
      }
    }
    uint4 packed;
    packed.x = f32_to_bf16_bits(v[0]) | (static_cast<uint32_t>(f32_to_bf16_bits(v[1])) << 16);
    packed.y = f32_to_bf16_bits(v[2]) | (static_cast<uint32_t>(f32_to_bf16_bits(v[3])) << 16);
    packed.z = f32_to_bf16_bits(v[4]) | (static_cast<uint32_t>(f32_to_bf16_bits(v[5])) << 16);
    packed.w = f32_to_bf16_bits(v[6]) | (static_cast<uint32_t>(f32_to_bf16_bits(v[7])) << 16);
    out[i] = packed;
  }
}

// One thread per value (any k).
__global__ void dequantize_by_one_kernel(const uint8_t* w, const uint8_t* scale, int64_t scale_cols,
                                         int64_t rows, int64_t k, int fp4, uint16_t* out) {
  FD_GRID_PROLOGUE();
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

}  // namespace

void dequantize_to_bf16(DeviceContext& ctx, const LinearWeight& w, int64_t rows, int64_t k,
                        uint16_t* out) {
  FD_CHECK(w.format == WeightFormat::Fp8Block || w.format == WeightFormat::Fp4Row,
           w.name + ": only FP8 / FP4 weights are dequantised");
  const bool fp4 = w.format == WeightFormat::Fp4Row;
  const uint8_t* data = ptr<const uint8_t>(w.data);
  const uint8_t* scale = ptr<const uint8_t>(w.scale);
  const int64_t scale_cols = w.scale.dim(1);
  if (rows == 0 || k == 0) return;
  const int64_t groups = k % 8 == 0 ? rows * (k / 8) : 0;
  if (groups > 0 && groups + kThreads * kGroupsPerThread < (int64_t{1} << 32) &&
      k < (int64_t{1} << 32) && scale_cols < (int64_t{1} << 32)) {
    FD_LAUNCH(fp4 ? &dequantize_by_eight_kernel<true> : &dequantize_by_eight_kernel<false>,
              dim3(blocks_for(groups, kThreads * kGroupsPerThread)), dim3(kThreads), 0,
              ctx.stream(), data, scale, static_cast<uint32_t>(scale_cols),
              static_cast<uint32_t>(rows), static_cast<uint32_t>(k), reinterpret_cast<uint4*>(out));
  } else {
    FD_LAUNCH(dequantize_by_one_kernel, dim3(blocks_for(rows * k, kThreads)), dim3(kThreads), 0,
              ctx.stream(), data, scale, scale_cols, rows, k, static_cast<int>(fp4), out);
  }
}

}  // namespace flashdesk::cuda
