// The routed experts of a prefill-sized MoE step on the tensor cores (moe_grouped.h). The pairs
// (token row, top-k column) are grouped by expert on the host (the ids are read back anyway) and
// cut into tiles of up to 64 pairs of one expert; two launches then run every tile:
//   up:   a CTA takes a tile and 64 inter columns: the pairs' act_quant'ed rows of x (BF16, exact)
//         against the columns' w1 and w3 rows, interleaved so that a thread's two accumulators
//         of an mma tile are the gate and the up value of one column; SwiGLU with the routing
//         weight in the epilogue, h in pair order;
//   down: a CTA takes a tile and 128 output dims: the pairs' act_quant'ed h rows against w2.
// Each 64-wide k chunk of the weight rows (two FP4 scale blocks) is decoded into shared memory
// as BF16 (E2M1 x UE8M0 is exact in BF16), the next chunk's bytes loaded into registers while
// the tensor cores (mma.cuh) work on this one. The weights are read once per tile, never copied.
#include <algorithm>

#include "engine/ops/cuda/cuda_compat.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/linear.cuh"
#include "engine/ops/cuda/mma.cuh"
#include "engine/ops/cuda/moe_grouped.h"
#include "engine/ops/cuda/moe_table.cuh"
#include "engine/ops/weights.h"

namespace flashdesk::cuda {
namespace {

constexpr int kTilePairs = 64;       // A rows of a CTA
constexpr int kTileWeights = 128;    // B rows of a CTA (up: 64 columns x {w1, w3})
constexpr int kChunk = 64;           // k per step
constexpr int kStride = kChunk + 8;  // BF16 per staged row: fragment loads on distinct banks
constexpr int kThreads = 256;

struct GroupedArgs {
  const ExpertEntry* table;
  const uint16_t* a;     // up: x act_quant'ed [n, dim]; down: h act_quant'ed [pairs, inter]
  const int32_t* rows;   // the pairs' token rows (up)
  const int32_t* slots;  // the pairs' output slots (down)
  const float* weights;  // the pairs' routing weights (up)
  const int32_t* tiles;  // [tiles][3]
  int64_t k, inter, dim;
  float limit;
  float* out;  // up: h [pairs, inter]; down: o [slots, dim]
};

__device__ __forceinline__ float swiglu(float g, float u, float w, float limit) {
  if (limit > 0.0f) {
    u = fminf(fmaxf(u, -limit), limit);
    g = fminf(g, limit);
  }
  return round_bf16(__fmul_rn(__fmul_rn(g / (1.0f + expf(-g)), u), w));
}

template <bool kUp>
__global__ void __launch_bounds__(kThreads) grouped_expert_kernel(GroupedArgs a) {
  FD_GRID_PROLOGUE();
  __shared__ __align__(16) uint16_t as[kTilePairs * kStride];
  __shared__ __align__(16) uint16_t bs[kTileWeights * kStride];
  const int32_t* tile = a.tiles + 3 * static_cast<int64_t>(blockIdx.y);
  const int expert = tile[0], first = tile[1], count = tile[2];
  const ExpertEntry& e = a.table[expert];
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, c = 2 * (lane & 3), wm = warp >> 2, wn = warp & 3;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * (kUp ? kTileWeights / 2 : kTileWeights);

  // This thread's loads: 16 A values of pair row tid / 4 and 32 codes of weight row tid / 2.
  const int a_row = tid >> 2, a_off = (tid & 3) * 16;
  const uint16_t* a_src = nullptr;
  if (a_row < count) {
    const int64_t r = kUp ? a.rows[first + a_row] : first + a_row;
    a_src = a.a + r * a.k + a_off;
  }
  const int b_row = tid >> 1, b_off = (tid & 1) * 32;
  const int m = kUp ? (b_row & 1) : 2;  // w1 / w3 interleaved (up), w2 (down)
  const int64_t w_row = kUp ? col0 + (b_row >> 1) : col0 + b_row;
  const uint8_t* b_codes = e.data[m] + w_row * (a.k / 2) + b_off / 2;
  const uint8_t* b_scales = e.scale[m] + w_row * e.scale_cols[m] + b_off / 32;

  struct Raw {
    uint4 a[2], b;
    uint8_t scale;
  };
  Raw raw = {};
  auto load_chunk = [&](Raw& r, int64_t k0) {
    if (a_src) {
      r.a[0] = load_aligned<uint4>(a_src + k0);
      r.a[1] = load_aligned<uint4>(a_src + k0 + 8);
    } else {
      r.a[0] = r.a[1] = uint4{0, 0, 0, 0};
    }
    r.b = load_aligned<uint4>(b_codes + k0 / 2);
    r.scale = b_scales[k0 / 32];
  };
  auto store_chunk = [&](const Raw& r) {
    *reinterpret_cast<uint4*>(as + a_row * kStride + a_off) = r.a[0];
    *reinterpret_cast<uint4*>(as + a_row * kStride + a_off + 8) = r.a[1];
    const float sc = e8m0_to_f32(r.scale);
    const uint32_t words[4] = {r.b.x, r.b.y, r.b.z, r.b.w};
    uint16_t* dst = bs + b_row * kStride + b_off;
    FD_UNROLL
    for (int w = 0; w < 4; ++w) {
      uint4 out;
      uint32_t* o = &out.x;
      FD_UNROLL
      for (int i = 0; i < 4; ++i) {
        const uint32_t byte = (words[w] >> (8 * i)) & 0xFFu;  // low nibble: the even column
        o[i] = pack_bf16_pair(f32_to_bf16_bits(e2m1_exact(byte & 0xFu) * sc),
                              f32_to_bf16_bits(e2m1_exact(byte >> 4) * sc));
      }
      *reinterpret_cast<uint4*>(dst + 8 * w) = out;
    }
  };

  float acc[2][4][4];
  FD_UNROLL
  for (int mt = 0; mt < 2; ++mt) FD_UNROLL
  for (int nt = 0; nt < 4; ++nt) FD_UNROLL
  for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

  // The products of the chunk staged in shared memory.
  auto multiply = [&] {
    FD_UNROLL
    for (int kk = 0; kk < kChunk; kk += 16) {
      uint32_t af[2][4], bf[4][2];
      FD_UNROLL
      for (int mt = 0; mt < 2; ++mt) {
        const uint16_t* r0 = as + (32 * wm + 16 * mt + g) * kStride + kk + c;
        const uint16_t* r8 = r0 + 8 * kStride;
        af[mt][0] = *reinterpret_cast<const uint32_t*>(r0);
        af[mt][1] = *reinterpret_cast<const uint32_t*>(r8);
        af[mt][2] = *reinterpret_cast<const uint32_t*>(r0 + 8);
        af[mt][3] = *reinterpret_cast<const uint32_t*>(r8 + 8);
      }
      FD_UNROLL
      for (int nt = 0; nt < 4; ++nt) {
        const uint16_t* r = bs + (32 * wn + 8 * nt + g) * kStride + kk + c;
        bf[nt][0] = *reinterpret_cast<const uint32_t*>(r);
        bf[nt][1] = *reinterpret_cast<const uint32_t*>(r + 8);
      }
      FD_UNROLL
      for (int mt = 0; mt < 2; ++mt) FD_UNROLL
      for (int nt = 0; nt < 4; ++nt) mma_bf16_16816(acc[mt][nt], af[mt], bf[nt]);
    }
  };
  // One chunk's bytes in flight while the previous one is multiplied (two in flight, in two
  // register sets, measured no faster on the H200: 64.2 vs 62.1 ms a window-only 8K prefill).
  load_chunk(raw, 0);
  for (int64_t k0 = 0; k0 < a.k; k0 += kChunk) {
    store_chunk(raw);
    __syncthreads();
    if (k0 + kChunk < a.k) load_chunk(raw, k0 + kChunk);
    multiply();
    __syncthreads();
  }

  // Epilogue: rows 32 wm + 16 mt + g (+ 8) of the tile, B rows 32 wn + 8 nt + c (+ 1).
  FD_UNROLL
  for (int mt = 0; mt < 2; ++mt) {
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int row = 32 * wm + 16 * mt + g + 8 * half;
      if (row >= count) continue;
      const int pair = first + row;
      FD_UNROLL
      for (int nt = 0; nt < 4; ++nt) {
        const float v0 = acc[mt][nt][2 * half], v1 = acc[mt][nt][2 * half + 1];
        const int b = 32 * wn + 8 * nt + c;
        if (kUp) {  // v0 = gate, v1 = up of column col0 + b / 2
          a.out[static_cast<int64_t>(pair) * a.inter + col0 + b / 2] =
              swiglu(round_bf16(v0), round_bf16(v1), a.weights[pair], a.limit);
        } else {
          float2 r;
          r.x = round_bf16(v0);
          r.y = round_bf16(v1);
          *reinterpret_cast<float2*>(a.out + static_cast<int64_t>(a.slots[pair]) * a.dim + col0 +
                                     b) = r;
        }
      }
    }
  }
}

}  // namespace

ExpertRowPlan plan_expert_rows(std::span<const int32_t> ids, std::span<const float> weights,
                               int64_t k, int64_t slots_per_row, int64_t experts) {
  ExpertRowPlan p;
  std::vector<int64_t> start(static_cast<size_t>(experts + 1), 0);
  for (const int32_t id : ids) ++start[static_cast<size_t>(id) + 1];
  for (int64_t e = 0; e < experts; ++e)
    start[static_cast<size_t>(e + 1)] += start[static_cast<size_t>(e)];
  p.rows.resize(ids.size());
  p.slots.resize(ids.size());
  p.weights.resize(ids.size());
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (size_t i = 0; i < ids.size(); ++i) {  // ascending row within an expert
    const auto at = static_cast<size_t>(next[static_cast<size_t>(ids[i])]++);
    const int64_t row = static_cast<int64_t>(i) / k, col = static_cast<int64_t>(i) % k;
    p.rows[at] = static_cast<int32_t>(row);
    p.slots[at] = static_cast<int32_t>(row * slots_per_row + col);
    p.weights[at] = weights[i];
  }
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t f = start[static_cast<size_t>(e)]; f < start[static_cast<size_t>(e + 1)];
         f += kTilePairs) {
      const int64_t count = std::min<int64_t>(kTilePairs, start[static_cast<size_t>(e + 1)] - f);
      p.tiles.insert(p.tiles.end(), {static_cast<int32_t>(e), static_cast<int32_t>(f),
                                     static_cast<int32_t>(count)});
    }
  return p;
}

bool grouped_experts_fit(std::span<const ExpertEntry> table, int64_t experts, int64_t dim) {
  if (experts < 1 || static_cast<int64_t>(table.size()) < experts || dim % kTileWeights != 0)
    return false;
  const int64_t inter = table[0].inter;
  if (inter < 1 || inter % (kTileWeights / 2) != 0) return false;
  for (int64_t e = 0; e < experts; ++e) {
    const ExpertEntry& x = table[static_cast<size_t>(e)];
    if (!x.data[0] || x.inter != inter || x.dim != dim) return false;
    for (int m = 0; m < 3; ++m) {
      if (x.format[m] != static_cast<int32_t>(WeightFormat::Fp4Row) || !x.scale[m]) return false;
      if (reinterpret_cast<uintptr_t>(x.data[m]) % 16 != 0) return false;
    }
  }
  return true;
}

void run_grouped_experts(DeviceContext& ctx, const ExpertEntry* table, const ExpertRowPlan& plan,
                         const float* x, int64_t n, int64_t dim, int64_t inter, float limit,
                         float* o) {
  const auto pairs = static_cast<int64_t>(plan.rows.size());
  const auto tiles = static_cast<unsigned>(plan.tiles.size() / 3);
  if (pairs == 0) return;
  Tensor rows = ctx.upload_span(std::span<const int32_t>(plan.rows), DType::I32);
  Tensor slots = ctx.upload_span(std::span<const int32_t>(plan.slots), DType::I32);
  Tensor weights = ctx.upload_span(std::span<const float>(plan.weights), DType::F32);
  Tensor tile_list = ctx.upload_span(std::span<const int32_t>(plan.tiles), DType::I32);
  Tensor xq = ctx.scratch(DType::BF16, Shape{n, dim});
  act_quant_to_bf16(ctx, x, n, dim, ptr<uint16_t>(xq));
  Tensor h = ctx.scratch(DType::F32, Shape{pairs, inter});
  GroupedArgs a{};
  a.table = table;
  a.a = ptr<const uint16_t>(xq);
  a.rows = ptr<const int32_t>(rows);
  a.slots = ptr<const int32_t>(slots);
  a.weights = ptr<const float>(weights);
  a.tiles = ptr<const int32_t>(tile_list);
  a.k = dim;
  a.inter = inter;
  a.dim = dim;
  a.limit = limit;
  a.out = ptr<float>(h);
  // Tiles along grid y, at most 65,535 a launch (a prompt of ~700k tokens at top-6).
  auto launch = [&](auto kernel, unsigned columns) {
    const int32_t* all = a.tiles;
    for (unsigned t0 = 0; t0 < tiles; t0 += 65535u) {
      a.tiles = all + 3 * static_cast<int64_t>(t0);
      FD_LAUNCH(kernel, dim3(columns, std::min(65535u, tiles - t0)), dim3(kThreads), 0,
                ctx.stream(), a);
    }
    a.tiles = all;
  };
  launch(grouped_expert_kernel<true>, static_cast<unsigned>(inter / (kTileWeights / 2)));
  Tensor hq = ctx.scratch(DType::BF16, Shape{pairs, inter});
  act_quant_to_bf16(ctx, ptr<const float>(h), pairs, inter, ptr<uint16_t>(hq));
  a.a = ptr<const uint16_t>(hq);
  a.k = inter;
  a.out = o;
  launch(grouped_expert_kernel<false>, static_cast<unsigned>(dim / kTileWeights));
}

}  // namespace flashdesk::cuda
