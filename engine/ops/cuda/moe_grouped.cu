// The routed experts of a prefill-sized MoE step on the tensor cores (moe_grouped.h). The pairs
// (token row, top-k column) are grouped by expert on the device (a count, one warp's scans that
// cut each expert's pairs into tiles of up to 128, a scatter), so the host never waits for the
// routing; two launches then run every tile:
//   up:   a CTA takes a tile and 16 C inter columns (C = 8 column warps at V4.1's shapes, else
//         4; TcShape): the pairs' act_quant'ed rows of x (BF16, exact)
//         against the columns' w1 and w3 rows, interleaved so that a thread's two accumulators
//         of an mma tile are the gate and the up value of one column; SwiGLU with the routing
//         weight in the epilogue, h in pair order;
//   down: a CTA takes a tile and 32 C output dims: the pairs' act_quant'ed h rows against w2.
// Each 64-wide k chunk of the weight rows (two FP4 scale blocks) is decoded into shared memory
// as BF16 (E2M1 x UE8M0 is exact in BF16) from registers loaded a chunk ahead, the pairs' rows
// arrive by cp.async two chunks ahead, and the tensor cores (mma.cuh) work on the chunk staged.
// The weights are read once per tile, never copied. A pair's products do not depend on which
// other pairs share its tile, so the scatter's order (atomics) does not change any value.
#include <algorithm>

#include "engine/ops/cuda/async_copy.cuh"
#include "engine/ops/cuda/cuda_compat.cuh"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/cuda/linear.cuh"
#include "engine/ops/cuda/mma.cuh"
#include "engine/ops/cuda/moe_grouped.h"
#include "engine/ops/cuda/moe_grouped_tile.cuh"
#include "engine/ops/cuda/moe_table.cuh"
#include "engine/ops/weights.h"

namespace flashdesk::cuda {
namespace {

constexpr int kChunk = 64;           // k per step
constexpr int kStride = kChunk + 8;  // BF16 per staged row: fragment loads on distinct banks
// A CTA's warps: two along the pairs (64 rows each) by C along the weight rows (32 each), so a
// CTA takes 32 C weight rows (up: 16 C columns x {w1, w3}). Its shared memory: A (the pairs'
// rows) three chunks deep, filled by cp.async two chunks ahead; B (the decoded weights) two deep,
// decoded from registers loaded one chunk ahead.
constexpr int kAStages = 3, kBStages = 2;
constexpr int kAStageElems = kTilePairs * kStride;
template <int C>
struct TcShape {
  static constexpr int kThreads = 64 * C, kWeights = 32 * C;
  static constexpr int kBStageElems = kWeights * kStride;
  static constexpr size_t kSmemBytes =
      (kAStages * kAStageElems + kBStages * kBStageElems) * sizeof(uint16_t);
  static constexpr int kAPieces = 1024 / kThreads;  // 16-byte copies of A a thread a chunk
};

// The routed experts' tensor-core kernel: a CTA takes a tile of up to 128 pairs and 32 C weight
// rows, 2 C warps of 64 x 32 (a warp whose rows are all past the tile's pairs skips the
// products); A through cp.async, B decoded once per CTA and chunk (a 128-pair tile pays the
// decoding once where the 64-pair tiles before paid it twice), fragments by ldmatrix.
template <bool kUp, int C>
__global__ void __launch_bounds__(TcShape<C>::kThreads, 8 / C)
    grouped_expert_tc_kernel(GroupedArgs a) {
  using S = TcShape<C>;
  constexpr int kWeights = S::kWeights, kPieces = S::kAPieces;
  FD_GRID_PROLOGUE();
  const int64_t t = a.tile0 + blockIdx.y;
  if (t >= *a.tile_count) return;
  FD_DYNAMIC_SMEM(uint16_t, smem);
  uint16_t* const as = smem;                            // [kAStages][kTilePairs][kStride]
  uint16_t* const bs = smem + kAStages * kAStageElems;  // [kBStages][kWeights][kStride]
  const int32_t* tile = a.tiles + 3 * t;
  const int expert = tile[0], first = tile[1], count = tile[2];
  const ExpertEntry& e = a.table[expert];
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, c = 2 * (lane & 3), wm = warp / C, wn = warp % C;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * (kUp ? kWeights / 2 : kWeights);

  // This thread's copies: 8 kPieces A values of a pair row (rows past the pairs are left stale:
  // their products are never stored) and 32 codes of weight row tid / 2.
  const int a_row = tid / (8 / kPieces), a_off = (tid % (8 / kPieces)) * 8 * kPieces;
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

  auto copy_a = [&](int stage, int64_t k0) {
    if (a_src) {
      uint16_t* dst = as + stage * kAStageElems + a_row * kStride + a_off;
      FD_UNROLL
      for (int i = 0; i < kPieces; ++i) async_copy16(dst + 8 * i, a_src + k0 + 8 * i);
    }
    async_commit();
  };
  uint4 raw = {0, 0, 0, 0};
  uint32_t raw_scale = 0;
  auto load_b = [&](int64_t k0) {
    raw = load_aligned<uint4>(b_codes + k0 / 2);
    raw_scale = b_scales[k0 / 32];
  };
  auto store_b = [&](int stage) {
    const uint32_t sc = f32_to_bf16_bits(e8m0_to_f32(raw_scale)) * 0x10001u;
    uint16_t* dst = bs + stage * S::kBStageElems + b_row * kStride + b_off;
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    FD_UNROLL
    for (int w = 0; w < 4; ++w) {
      uint32_t r[4];
      e2m1x8_to_bf16(words[w], sc, r);
      *reinterpret_cast<uint4*>(dst + 8 * w) = uint4{r[0], r[1], r[2], r[3]};
    }
  };

  float acc[4][4][4];
  FD_UNROLL
  for (int mt = 0; mt < 4; ++mt) FD_UNROLL
  for (int nt = 0; nt < 4; ++nt) FD_UNROLL
  for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

  // ldmatrix rows: A's 16 x 16 tiles as (rows 0-7, 8-15) x (k 0-7, 8-15); B's two n tiles of 8 as
  // (n 0-7: k 0-7, 8-15), (n 8-15: k 0-7, 8-15).
  const int a_frag = (64 * wm + (lane & 15)) * kStride + (lane >> 4) * 8;
  const int b_frag =
      (32 * wn + ((lane >> 4) & 1) * 8 + (lane & 7)) * kStride + ((lane >> 3) & 1) * 8;
  auto multiply = [&](const uint16_t* A, const uint16_t* B) {
    FD_UNROLL
    for (int kk = 0; kk < kChunk; kk += 16) {
      uint32_t bf[4][2];
      FD_UNROLL
      for (int np = 0; np < 2; ++np) {
        uint32_t r[4];
        ldmatrix_x4(r, B + b_frag + 16 * np * kStride + kk);
        bf[2 * np][0] = r[0];
        bf[2 * np][1] = r[1];
        bf[2 * np + 1][0] = r[2];
        bf[2 * np + 1][1] = r[3];
      }
      FD_UNROLL
      for (int mt = 0; mt < 4; ++mt) {
        uint32_t af[4];
        ldmatrix_x4(af, A + a_frag + 16 * mt * kStride + kk);
        FD_UNROLL
        for (int nt = 0; nt < 4; ++nt) mma_bf16_16816(acc[mt][nt], af, bf[nt]);
      }
    }
  };

  // Chunk i: its B decoded into stage i % 2 (last read by chunk i - 2's products, before the
  // previous barrier), chunk i + 1's codes loaded, A's chunk i awaited; after the barrier A's
  // stage (i + 2) % 3 (last read by chunk i - 1's products) is refilled.
  const int64_t chunks = a.k / kChunk;
  const bool live = 64 * wm < count;
  copy_a(0, 0);
  copy_a(1 % kAStages, chunks > 1 ? kChunk : 0);
  load_b(0);
  for (int64_t i = 0; i < chunks; ++i) {
    store_b(static_cast<int>(i % kBStages));
    if (i + 1 < chunks) load_b((i + 1) * kChunk);
    async_wait<1>();
    __syncthreads();
    if (i + 2 < chunks)
      copy_a(static_cast<int>((i + 2) % kAStages), (i + 2) * kChunk);
    else
      async_commit();
    if (live) multiply(as + (i % kAStages) * kAStageElems, bs + (i % kBStages) * S::kBStageElems);
  }

  // Epilogue: rows 64 wm + 16 mt + g (+ 8) of the tile, B rows 32 wn + 8 nt + c (+ 1).
  FD_UNROLL
  for (int mt = 0; mt < 4; ++mt) {
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int row = 64 * wm + 16 * mt + g + 8 * half;
      if (row >= count) continue;
      const int pair = first + row;
      FD_UNROLL
      for (int nt = 0; nt < 4; ++nt)
        store_pair_result<kUp>(a, pair, col0, 32 * wn + 8 * nt + c, acc[mt][nt][2 * half],
                               acc[mt][nt][2 * half + 1]);
    }
  }
}

// ---- the plan: pairs grouped by expert, on the device

// counts[e] = the pairs routed to expert e (ids out of range are skipped, here and below: the
// routing never makes them, and they must not write out of bounds).
__global__ void expert_count_kernel(const int32_t* ids, int64_t pairs, int64_t experts,
                                    int32_t* counts) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  const int32_t id = ids[i];
  if (id >= 0 && id < experts) atomicAdd(counts + id, 1);
}

// One warp: the experts' first pairs (an exclusive scan of the counts) as the scatter's cursors,
// and their tiles of up to kTilePairs pairs in expert order. Lane j takes a run of experts.
__global__ void expert_tiles_kernel(const int32_t* counts, int64_t experts, int32_t* cursor,
                                    int32_t* tiles, int32_t* tile_count) {
  FD_GRID_PROLOGUE();
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t per = (experts + 31) / 32, e0 = lane * per,
                e1 = e0 + per < experts ? e0 + per : experts;
  int32_t pair_sum = 0, tile_sum = 0;
  for (int64_t e = e0; e < e1; ++e) {
    pair_sum += counts[e];
    tile_sum += (counts[e] + kTilePairs - 1) / kTilePairs;
  }
  int32_t pair_at = pair_sum, tile_at = tile_sum;  // inclusive scans over the lanes
  FD_UNROLL
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t p = __shfl_up_sync(kFullMask, pair_at, o);
    const int32_t t = __shfl_up_sync(kFullMask, tile_at, o);
    if (lane >= o) pair_at += p, tile_at += t;
  }
  if (lane == 31) *tile_count = tile_at;
  pair_at -= pair_sum;
  tile_at -= tile_sum;
  for (int64_t e = e0; e < e1; ++e) {
    const int32_t c = counts[e];
    cursor[e] = pair_at;
    for (int32_t f = 0; f < c; f += kTilePairs, ++tile_at) {
      tiles[3 * tile_at] = static_cast<int32_t>(e);
      tiles[3 * tile_at + 1] = pair_at + f;
      tiles[3 * tile_at + 2] = c - f < kTilePairs ? c - f : kTilePairs;
    }
    pair_at += c;
  }
}

// Each pair to the next place of its expert's run: its token row, output slot and weight.
__global__ void expert_scatter_kernel(const int32_t* ids, const float* weights, int64_t pairs,
                                      int64_t k, int64_t slots_per_row, int64_t experts,
                                      int32_t* cursor, int32_t* rows, int32_t* slots, float* w) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  const int32_t id = ids[i];
  if (id < 0 || id >= experts) return;
  const int32_t at = atomicAdd(cursor + id, 1);
  const int64_t row = i / k;
  rows[at] = static_cast<int32_t>(row);
  slots[at] = static_cast<int32_t>(row * slots_per_row + i % k);
  w[at] = weights[i];
}

}  // namespace

bool grouped_experts_fit(std::span<const ExpertEntry> table, int64_t experts, int64_t dim) {
  if (experts < 1 || static_cast<int64_t>(table.size()) < experts ||
      dim % TcShape<4>::kWeights != 0)
    return false;
  const int64_t inter = table[0].inter;
  if (inter < 1 || inter % (TcShape<4>::kWeights / 2) != 0) return false;
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

namespace {

// The up and the down stage with C column warps a CTA (TcShape), or on the wgmma kernels.
template <int C>
void launch_grouped(DeviceContext& ctx, GroupedArgs a, int64_t max_tiles, int64_t pairs,
                    int64_t dim, int64_t inter, float* h, float* o) {
  using S = TcShape<C>;
  // Hopper: the same tiles on the warpgroup products (moe_grouped_sm90a.cu), where this binary
  // has them for the device.
  const WgmmaExperts w = ctx.wgmma_experts();
  // At any pairs an expert: their products cover a tile's pairs rounded up to 32, so few pairs
  // cost few products. H200, the 40 layers' 32-row decode steps (0.5 pairs an expert) 163 against
  // 190 ms on the mma.sync kernels, a 512-token prefill 6.5 against 8.1 ms a window-only layer
  // (with products over every row of a tile, the 32-row steps took 207 ms).
  const bool wgmma = w != WgmmaExperts::Off && grouped_wgmma_runs();
  const bool wide = w == WgmmaExperts::Auto && grouped_wgmma_wide_fits(dim, inter);
  if (wgmma)
    launch_grouped_wgmma(ctx, a, true, max_tiles, wide);
  else
    launch_tiles<grouped_expert_tc_kernel<true, C>>(
        ctx, "grouped_expert_tc_kernel<up>", a, static_cast<unsigned>(inter / (S::kWeights / 2)),
        max_tiles, S::kThreads, S::kSmemBytes);
  Tensor hq = ctx.scratch(DType::BF16, Shape{pairs, inter});
  act_quant_to_bf16(ctx, h, pairs, inter, ptr<uint16_t>(hq));
  a.a = ptr<const uint16_t>(hq);
  a.k = inter;
  a.out = o;
  if (wgmma)
    launch_grouped_wgmma(ctx, a, false, max_tiles, wide);
  else
    launch_tiles<grouped_expert_tc_kernel<false, C>>(ctx, "grouped_expert_tc_kernel<down>", a,
                                                     static_cast<unsigned>(dim / S::kWeights),
                                                     max_tiles, S::kThreads, S::kSmemBytes);
}

}  // namespace

void run_grouped_experts(DeviceContext& ctx, const ExpertEntry* table, const int32_t* ids,
                         const float* weights, int64_t k, int64_t slots_per_row, int64_t experts,
                         const uint16_t* xq, int64_t n, int64_t dim, int64_t inter, float limit,
                         float* o) {
  const int64_t pairs = n * k;
  if (pairs == 0) return;
  // At most one partial tile an expert beyond the full ones.
  const int64_t max_tiles = pairs / kTilePairs + std::min(experts, pairs);
  Tensor counts = ctx.scratch(DType::I32, Shape{experts});
  Tensor cursor = ctx.scratch(DType::I32, Shape{experts});
  Tensor tiles = ctx.scratch(DType::I32, Shape{max_tiles, 3});
  Tensor tile_count = ctx.scratch(DType::I32, Shape{1});
  Tensor rows = ctx.scratch(DType::I32, Shape{pairs});
  Tensor slots = ctx.scratch(DType::I32, Shape{pairs});
  Tensor pair_weights = ctx.scratch(DType::F32, Shape{pairs});
  fill_async(counts.bytes(), 0, counts.nbytes(), ctx.stream());
  const unsigned pair_blocks = blocks_for(pairs, 256);
  FD_LAUNCH(expert_count_kernel, dim3(pair_blocks), dim3(256), 0, ctx.stream(), ids, pairs, experts,
            ptr<int32_t>(counts));
  FD_LAUNCH(expert_tiles_kernel, dim3(1), dim3(32), 0, ctx.stream(), ptr<const int32_t>(counts),
            experts, ptr<int32_t>(cursor), ptr<int32_t>(tiles), ptr<int32_t>(tile_count));
  FD_LAUNCH(expert_scatter_kernel, dim3(pair_blocks), dim3(256), 0, ctx.stream(), ids, weights,
            pairs, k, slots_per_row, experts, ptr<int32_t>(cursor), ptr<int32_t>(rows),
            ptr<int32_t>(slots), ptr<float>(pair_weights));

  Tensor h = ctx.scratch(DType::F32, Shape{pairs, inter});
  GroupedArgs a{};
  a.table = table;
  a.a = xq;
  a.rows = ptr<const int32_t>(rows);
  a.slots = ptr<const int32_t>(slots);
  a.weights = ptr<const float>(pair_weights);
  a.tiles = ptr<const int32_t>(tiles);
  a.tile_count = ptr<const int32_t>(tile_count);
  a.k = dim;
  a.inter = inter;
  a.dim = dim;
  a.limit = limit;
  a.out = ptr<float>(h);
  a.fitted_products = ctx.wgmma_fitted_products() ? 1 : 0;
  // Eight column warps where the shapes allow: half the pairs' reads a product (up 10.4 -> 9.9
  // ms an 8K-token prefill of V4.1's experts, down equal), else four.
  if (dim % TcShape<8>::kWeights == 0 && inter % (TcShape<8>::kWeights / 2) == 0)
    launch_grouped<8>(ctx, a, max_tiles, pairs, dim, inter, ptr<float>(h), o);
  else
    launch_grouped<4>(ctx, a, max_tiles, pairs, dim, inter, ptr<float>(h), o);
}

}  // namespace flashdesk::cuda
