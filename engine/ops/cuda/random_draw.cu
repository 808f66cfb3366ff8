// A synthetic checkpoint's weight drawn on the device (random_draw.h): one thread draws 32
// consecutive values of a row (16 Box-Muller pairs) and quantises them as one block.
#include "engine/ops/cuda/random_draw.h"

#include <cmath>

#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/device_numeric.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/step_ops.h"
#include "engine/util/error.h"

namespace flashdesk::cuda {
namespace {

using Format = RandomTensorPlan::Format;

constexpr int kThreads = 256;
constexpr int kBlockValues = 32;                     // values a thread draws: a quantisation block
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // splitmix64's increment
constexpr double kTwoPi = 0x1.921fb54442d18p+2;      // 2 * std::numbers::pi, exactly

FD_DEV uint64_t splitmix_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

FD_DEV void sin_cos(double a, double* s, double* c) {
#ifdef FLASHDESK_CUDA_EMU
  *s = std::sin(a);  // the host's own functions, as random_init.cpp calls them
  *c = std::cos(a);
#else
  sincos(a, s, c);
#endif
}

// Pair p of the row seeded `seed`: the sequence's draws 2p + 1 and 2p + 2 (next() adds the
// increment before mixing), as SplitMix64::normal_pair turns them into normals; every operation
// rounded as written (no fused multiply-add), as the host's code rounds it.
FD_DEV void normal_pair(uint64_t seed, int64_t p, double& z0, double& z1) {
  const uint64_t step = static_cast<uint64_t>(2 * p + 1) * kGolden;
  const double u1 = static_cast<double>(splitmix_mix(seed + step) >> 11) * 0x1p-53;
  const double u2 = static_cast<double>(splitmix_mix(seed + step + kGolden) >> 11) * 0x1p-53;
  const double r = sqrt(-2.0 * log(__dsub_rn(1.0, u1)));
  double s, c;
  sin_cos(__dmul_rn(kTwoPi, u2), &s, &c);
  z0 = __dmul_rn(r, c);
  z1 = __dmul_rn(r, s);
}

// mean + std * z as a float, and whether the host could round it to another float: some value
// within the margin of the double rounds to a different one.
FD_DEV float draw_value(const RandomDraw& d, double margin, double z, bool& unsafe) {
  const double term = __dmul_rn(d.std, z);
  const double v = __dadd_rn(d.mean, term);
  const float f = __double2float_rn(v);
  const double m = __dadd_rn(__dmul_rn(fabs(term), margin), __dmul_rn(fabs(v), 0.25 * margin));
  unsafe =
      unsafe || __double2float_rn(__dsub_rn(v, m)) != f || __double2float_rn(__dadd_rn(v, m)) != f;
  return f;
}

// Values [c0, c0 + n) of row `row` (c0 even, n <= 32); unsafe as draw_value says.
FD_DEV void draw_block(const RandomDraw& d, double margin, int64_t row, int64_t c0, int n,
                       float (&x)[kBlockValues], bool& unsafe) {
  const uint64_t seed = splitmix_mix(d.stream + static_cast<uint64_t>(row));
  FD_UNROLL_BY(1)
  for (int i = 0; i < n; i += 2) {
    double z0, z1;
    normal_pair(seed, (c0 + i) / 2, z0, z1);
    x[i] = draw_value(d, margin, z0, unsafe);
    if (i + 1 < n) x[i + 1] = draw_value(d, margin, z1, unsafe);
  }
}

FD_DEV float amax_of(const float (&x)[kBlockValues], int n) {
  float a = 0.0f;
  for (int i = 0; i < n; ++i) a = fmaxf(a, fabsf(x[i]));
  return a;
}

// A block's 32 codes of `Bits` bits (4: FP4 E2M1, packed low nibble first; 8: FP8 E4M3) at
// scale s, stored as whole 16-byte words at `out` (16-byte aligned).
template <int Bits>
FD_DEV void store_block(const float (&x)[kBlockValues], float s, uint8_t* out) {
  constexpr int kPerWord = 32 / Bits, kWords = kBlockValues / kPerWord;
  uint32_t words[kWords];
  FD_UNROLL
  for (int w = 0; w < kWords; ++w) {
    uint32_t word = 0;
    FD_UNROLL
    for (int i = 0; i < kPerWord; ++i) {
      const float v = x[kPerWord * w + i];
      const uint32_t c = Bits == 4 ? fp4_code(v, s) : fp8_code(v, s);
      word |= c << (Bits * i);
    }
    words[w] = word;
  }
  FD_UNROLL
  for (int q = 0; q < kWords / 4; ++q) {
    uint4 v;
    v.x = words[4 * q];
    v.y = words[4 * q + 1];
    v.z = words[4 * q + 2];
    v.w = words[4 * q + 3];
    reinterpret_cast<uint4*>(out)[q] = v;
  }
}

// Thread t: row t / blocks, columns 32 (t % blocks) on. FP4 rows: 16 packed bytes and a UE8M0
// code; FP8 rows (Engram tables): 32 codes and a UE8M0 code; BF16: up to 32 values.
__global__ void __launch_bounds__(kThreads)
    draw_rows_kernel(RandomDraw d, uint8_t* weight, uint8_t* scale, uint8_t* flags) {
  FD_GRID_PROLOGUE();
  const int64_t blocks = (d.cols + kBlockValues - 1) / kBlockValues;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (t >= d.rows * blocks) return;
  const int64_t r = t / blocks, b = t % blocks, c0 = b * kBlockValues;
  const int n = static_cast<int>(lmin(kBlockValues, d.cols - c0));
  float x[kBlockValues];
  bool unsafe = false;
  draw_block(d, ldexp(1.0, d.margin_log2), d.first_row + r, c0, n, x, unsafe);
  if (unsafe) flags[r] = 1;
  if (d.format == Format::Fp4Rows || d.format == Format::Fp8Rows) {
    const bool fp4 = d.format == Format::Fp4Rows;
    const float amax = amax_of(x, kBlockValues);
    const uint8_t code = fp4 ? fp4_e8m0_scale_code(amax) : fp8_scale_code(amax);
    uint8_t* out = weight + r * (fp4 ? d.cols / 2 : d.cols) + (fp4 ? c0 / 2 : c0);
    if (fp4)
      store_block<4>(x, e8m0_to_f32(code), out);
    else
      store_block<8>(x, e8m0_to_f32(code), out);
    scale[r * blocks + b] = code;
  } else {
    uint16_t* out = reinterpret_cast<uint16_t*>(weight) + r * d.cols + c0;
    for (int i = 0; i < n; ++i) out[i] = f32_to_bf16_bits(x[i]);
  }
}

// FP8 32 x 32 tiles: warp w takes the tile of row group w / blocks and column block w % blocks,
// lane l its row 32 g + l; the tile's UE8M0 scale comes from the warp's maximum.
__global__ void __launch_bounds__(kThreads)
    draw_tiles_kernel(RandomDraw d, uint8_t* weight, uint8_t* scale, uint8_t* flags) {
  FD_GRID_PROLOGUE();
  const int64_t blocks = (d.cols + kBlockValues - 1) / kBlockValues;
  const int64_t groups = (d.rows + 31) / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t w = t / 32;
  if (w >= groups * blocks) return;  // whole warps
  const int64_t g = w / blocks, b = w % blocks, c0 = b * kBlockValues, r = g * 32 + t % 32;
  const int n = static_cast<int>(lmin(kBlockValues, d.cols - c0));
  float x[kBlockValues];
  bool unsafe = false;
  if (r < d.rows) draw_block(d, ldexp(1.0, d.margin_log2), d.first_row + r, c0, n, x, unsafe);
  float amax = r < d.rows ? amax_of(x, n) : 0.0f;
  FD_UNROLL
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (unsafe) flags[g] = 1;
  const uint8_t code = fp8_scale_code(amax);
  if (t % 32 == 0) scale[g * blocks + b] = code;
  if (r >= d.rows) return;
  const float s = e8m0_to_f32(code);
  uint8_t* out = weight + r * d.cols + c0;
  for (int i = 0; i < n; ++i) out[i] = fp8_code(x[i], s);
}

}  // namespace

int64_t draw_units(const RandomDraw& d) {
  return d.format == Format::Fp8Tiles ? (d.rows + 31) / 32 : d.rows;
}

void draw_random_weight(DeviceContext& ctx, const RandomDraw& d, uint8_t* weight, uint8_t* scale,
                        uint8_t* flags) {
  FD_CHECK(d.rows >= 0 && d.cols > 0 && d.first_row >= 0, "draw_random_weight: bad shape");
  FD_CHECK(
      (d.format != Format::Fp4Rows && d.format != Format::Fp8Rows) || d.cols % kBlockValues == 0,
      "draw_random_weight: FP4 and FP8 rows need whole 32-value blocks");
  FD_CHECK(d.format != Format::Fp8Tiles || d.first_row % 32 == 0,
           "draw_random_weight: FP8 tiles are drawn from a whole 32-row group");
  const int64_t units = draw_units(d);
  if (units == 0) return;
  fill_async(flags, 0, static_cast<size_t>(units), ctx.stream());
  const int64_t blocks = (d.cols + kBlockValues - 1) / kBlockValues;
  if (d.format == Format::Fp8Tiles) {
    const int64_t threads = units * blocks * 32;
    FD_LAUNCH(draw_tiles_kernel, dim3(blocks_for(threads, kThreads)), dim3(kThreads), 0,
              ctx.stream(), d, weight, scale, flags);
  } else {
    FD_CHECK(
        d.format == Format::Fp4Rows || d.format == Format::Fp8Rows || d.format == Format::Plain,
        "draw_random_weight: unknown format");
    const int64_t threads = d.rows * blocks;
    FD_LAUNCH(draw_rows_kernel, dim3(blocks_for(threads, kThreads)), dim3(kThreads), 0,
              ctx.stream(), d, weight, scale, flags);
  }
}

}  // namespace flashdesk::cuda
