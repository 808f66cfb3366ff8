// Mixture of experts on the CUDA backend (MODEL-REFERENCE §5, docs/numerics.md "MoE").
//   moe_route: one block per token: sqrt-softplus scores, top-k of the biased scores by repeated
//     block arg-max, or, when two of the k + 1 best are equal, by torch's selection run step by
//     step (engine/util/torch_select.h); normalised and scaled weights; ids stay on the device.
//   moe_experts, up to 8 rows: the routed experts of every row (and the shared expert, below three
//     rows) in one grouped launch per stage, reading ids and weights on the device through a table
//     of expert weight pointers: on the tensor cores where the formats and shapes allow
//     (moe_decode_tc.cuh: V4.1's FP4 routed and FP8 shared experts), else on the CUDA cores with
//     the weight-streaming loops of gemv_device.cuh: gate and up
//     rows with SwiGLU fused (a warp reads 2 inter rows of w1 and the same 2 of w3, two chunks
//     deep), then the down projection (8 rows a warp); each block act_quant's its slot's row into
//     shared memory once, while its first loads are in flight, and loops over its share of the
//     slot's row tiles. From three rows on the shared expert runs as GEMVs over all rows (its
//     weights read once, not once per row). Then the FP32 sum over each row's experts in
//     ascending id, then the shared expert. More rows: per-expert GEMMs over the rows routed to
//     it (ids read back).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/gemv_device.cuh"
#include "engine/ops/cuda/linear.cuh"
#include "engine/ops/cuda/moe_decode_tc.cuh"
#include "engine/ops/cuda/moe_grouped.h"
#include "engine/ops/cuda/moe_slots.cuh"
#include "engine/ops/cuda/moe_table.cuh"
#include "engine/util/torch_select.h"

namespace flashdesk {
namespace cuda {
namespace {

// The route kernel: a thread per expert (at most kMaxRouteExperts a row).
constexpr int kRouteThreads = 512;
constexpr int64_t kMaxRouteExperts = kRouteThreads;
// The prefill route kernel: a warp per row, kRouteWarps rows a block, from kRouteRowsMin rows.
constexpr int kRouteWarps = 4;
constexpr int64_t kRouteRowsMin = 64;
constexpr int kRouteValuesPerLane = static_cast<int>(kMaxRouteExperts / 32);
constexpr int64_t kMaxExpertCols = 8192;  // staged activation columns of the grouped kernels
// Rows per warp and chunks in flight per lane per row, 8 sixteen-byte loads in flight per lane
// in both kernels: the up kernel reads kUpRows inter rows of w1 and the same of w3 two chunks
// deep, the down kernel kDownRows rows of w2 one deep (the most that fit 128 registers).
constexpr int kUpRows = 2, kUpDepth = 2;
constexpr int kDownRows = 8, kDownDepth = 1;
// From this many rows on, the shared expert runs as three GEMVs over all rows (its weights read
// once) instead of one grouped slot per row (read once per row): below, the extra launches cost
// about what the reads save.
constexpr int64_t kSharedApartRows = 3;

// Row `row` of matrix m of an expert as a warp reads it (nullptr past the matrix).
template <WeightFormat F>
__device__ __forceinline__ void expert_row(const ExpertEntry& e, int m, int64_t row, int64_t rows,
                                           int64_t k, const uint8_t** data, const uint8_t** scale) {
  const bool valid = row < rows;
  const int64_t scale_row = F == WeightFormat::Fp8Block ? row / 32 : row;
  *data = valid ? e.data[m] + row * Chunk<F>::bytes(k) : nullptr;
  *scale = valid && e.scale[m] ? e.scale[m] + scale_row * e.scale_cols[m] : nullptr;
}

// One slot's activation row [k] (act_quant'ed into xs once) against row tiles blockIdx.x, +
// gridDim.x, ... of `tiles`: `rows_of(tile)` gives the warp's R rows, `emit(tile, v)` gets the
// sums (lane L: row L / (32 / R)).
template <WeightFormat F, int R, int U, class RowsOf, class Emit>
__device__ void slot_tiles(int64_t tiles, RowsOf&& rows_of, Emit&& emit, const float* x, int64_t k,
                           float* xs) {
  constexpr bool kScaled = Chunk<F>::kCoded;
  stream_tiles<F, R, 1, U, kScaled>(
      tiles, rows_of,
      [&] { stage_rows<Chunk<F>::VW>(x, k, 1, k, true, kScaled ? kStageFactor : 1.0f, xs, 0); },
      [&](int64_t tile, float* acc) { emit(tile, warp_sum_many<R>(acc)); }, 0, k, k, xs, 0, 1);
}

// h[i] = bf16(silu(min(g, L)) * clamp(u, +-L) * w) with g = bf16(w1_i . act_quant(x)),
// u = bf16(w3_i . act_quant(x)), for the inter rows of this block's tiles.
template <WeightFormat F>
__device__ void expert_up_rows(const SlotArgs& a, const ExpertEntry& ex, bool routed, float weight,
                               const float* x, float* h, float* xs, int64_t first_tile,
                               int64_t tiles) {
  constexpr int64_t kTileRows = kGemvWarps * kUpRows;
  const unsigned lane = threadIdx.x & 31u;
  const int64_t warp_row = (threadIdx.x >> 5) * kUpRows;
  auto rows_of = [&](int64_t tile) {
    WarpRows<2 * kUpRows> rows;
    FD_UNROLL
    for (int r = 0; r < kUpRows; ++r) {
      const int64_t i = (first_tile + tile) * kTileRows + warp_row + r;
      expert_row<F>(ex, 0, i, ex.inter, ex.dim, &rows.row[r], &rows.scale[r]);
      expert_row<F>(ex, 1, i, ex.inter, ex.dim, &rows.row[kUpRows + r], &rows.scale[kUpRows + r]);
    }
    mark_whole(rows);
    return rows;
  };
  // Lanes 0..15 hold the gate rows, lanes 16..31 the up rows (32 / (2 kUpRows) lanes each).
  constexpr unsigned kLanes = 32 / (2 * kUpRows);
  auto emit = [&](int64_t tile, float g) {
    float u = __shfl_down_sync(kFullMask, g, 16);
    const int64_t i = (first_tile + tile) * kTileRows + warp_row + lane / kLanes;
    if (lane >= 16 || lane % kLanes != 0 || i >= ex.inter) return;
    g = round_bf16(g);
    u = round_bf16(u);
    if (a.limit > 0.0f) {
      u = fminf(fmaxf(u, -a.limit), a.limit);
      g = fminf(g, a.limit);
    }
    float v = __fmul_rn(g / (1.0f + expf(-g)), u);
    if (routed) v = __fmul_rn(v, weight);
    h[i] = round_bf16(v);
  };
  slot_tiles<F, 2 * kUpRows, kUpDepth>(tiles, rows_of, emit, x, ex.dim, xs);
}

// grid (inter tile blocks, grouped slots): the gate and up rows of each slot, a block looping
// over tiles of kGemvWarps * kUpRows inter rows.
__global__ void __launch_bounds__(kGemvThreads, kGemvBlocksPerSm)
    expert_up_kernel(SlotArgs a, const float* x, int64_t h_stride, float* h) {
  FD_GRID_PROLOGUE();
  __shared__ __align__(16) float staged[kMaxExpertCols];
  float* xs = staged;  // (the emulation's compiler loses track of a static array in a lambda)
  const SlotPart sp = grouped_slot(a);
  const int64_t slot = sp.slot;
  float weight;
  const int64_t e = slot_expert(a, slot, &weight);
  const ExpertEntry& ex = a.table[e];
  int64_t first_tile, tiles;
  part_tiles(sp, (ex.inter + kGemvWarps * kUpRows - 1) / (kGemvWarps * kUpRows), &first_tile,
             &tiles);
  // Whole blocks: another device's expert, or no tile of the part left for this block.
  if (ex.data[0] == nullptr || blockIdx.x >= tiles) return;
  const float* xt = x + (slot / a.slots_per_row) * ex.dim;
  with_format(ex.format[0], [&]<WeightFormat F>() {
    expert_up_rows<F>(a, ex, e != a.n_routed, weight, xt, h + slot * h_stride, xs, first_tile,
                      tiles);
  });
}

// y[t][d] = row t's expert outputs summed in ascending expert id, then the shared one (FP32,
// unrounded); experts of another device (null table entries) are skipped. grid (column blocks,
// rows): the first warp ranks the row's k ids once (lane j: how many ids are smaller) into a
// shared slot order, then each thread's loads are independent of each other. Each thread sorting
// the ids itself, with dependent global loads, took 9.5 µs of a decode layer on the H200.
// kVec: four columns a thread (dim a multiple of 4, o, y and shared_out 16-byte aligned).
template <bool kVec>
__global__ void expert_sum_kernel(SlotArgs a, const float* o, int64_t dim, float* y) {
  FD_GRID_PROLOGUE();
  __shared__ int32_t order[kMaxTopK];
  const int64_t t = blockIdx.y;
  if (threadIdx.x < 32) rank_row_slots(a, t, order);
  __syncthreads();
  const int64_t d = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * (kVec ? 4 : 1);
  if (d >= dim) return;
  const float* row = o + t * a.slots_per_row * dim + d;
  float sums[kVec ? 4 : 1];
  ordered_slot_sums(a, order, row, dim, t, d, sums);
  if constexpr (kVec)
    *reinterpret_cast<float4*>(y + t * dim + d) = float4{sums[0], sums[1], sums[2], sums[3]};
  else
    y[t * dim + d] = sums[0];
}

// grid (dim tile blocks, grouped slots): o[slot][d] = bf16(w2_d . act_quant(h[slot])), a block
// looping over tiles of kGemvWarps * kDownRows rows.
__global__ void __launch_bounds__(kGemvThreads, kGemvBlocksPerSm)
    expert_down_kernel(SlotArgs a, const float* h, int64_t h_stride, int64_t dim, float* o) {
  FD_GRID_PROLOGUE();
  constexpr int64_t kTileRows = kGemvWarps * kDownRows;
  __shared__ __align__(16) float staged[kMaxExpertCols];
  float* xs = staged;
  const SlotPart sp = grouped_slot(a);
  const int64_t slot = sp.slot;
  float weight;
  const ExpertEntry& ex = a.table[slot_expert(a, slot, &weight)];
  int64_t first_tile, tiles;
  part_tiles(sp, (dim + kTileRows - 1) / kTileRows, &first_tile, &tiles);
  if (ex.data[0] == nullptr || blockIdx.x >= tiles) return;
  const unsigned lane = threadIdx.x & 31u;
  const int64_t warp_row = (threadIdx.x >> 5) * kDownRows;
  with_format(ex.format[2], [&]<WeightFormat F>() {
    auto rows_of = [&](int64_t tile) {
      WarpRows<kDownRows> rows;
      FD_UNROLL
      for (int r = 0; r < kDownRows; ++r)
        expert_row<F>(ex, 2, (first_tile + tile) * kTileRows + warp_row + r, dim, ex.inter,
                      &rows.row[r], &rows.scale[r]);
      mark_whole(rows);
      return rows;
    };
    auto emit = [&](int64_t tile, float v) {
      const int64_t d = (first_tile + tile) * kTileRows + warp_row + lane / (32 / kDownRows);
      if (lane % (32 / kDownRows) == 0 && d < dim) o[slot * dim + d] = round_bf16(v);
    };
    slot_tiles<F, kDownRows, kDownDepth>(tiles, rows_of, emit, h + slot * h_stride, ex.inter, xs);
  });
}

// y[i] = routed[i] + y[i] (FP32): the host's routed sum, then the device's shared expert.
__global__ void add_routed_kernel(const float* routed, int64_t n, float* y) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = routed[i] + y[i];
}

// ---- routing ----

// An expert's routing score from its gate logit z: sqrt(softplus(z / gate_temp)).
__device__ __forceinline__ float route_score(float z, float gate_temp) {
  if (gate_temp != 1.0f) z /= gate_temp;
  return sqrtf(z > 20.0f ? z : log1pf(expf(z)));
}

// Row t's ids and weights from its k + 1 best experts by rank in chosen[0, k] (-1 past the row's
// non-NaN scores), one warp, lane j taking the j-th pick: torch's choice and order where two of
// them are equal (worked out in `pairs`, room for E), the weights the unbiased scores, normalised
// in torch's order.
__device__ void finish_route(int32_t* chosen, const float* score, const float* biased,
                             const float* b, torch_select::Scored* pairs, int64_t E, int64_t k,
                             float scale, int norm, int64_t t, int32_t* ids, float* weights) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  // Ties among the k + 1 best: torch's choice and order among equal scores (docs/numerics.md
  // "Top-k").
  const bool equal_to_previous = lane >= 1 && lane <= k && lane < E && chosen[lane] >= 0 &&
                                 chosen[lane - 1] >= 0 &&
                                 biased[chosen[lane]] == biased[chosen[lane - 1]];
  if (__ballot_sync(kFullMask, equal_to_previous) != 0u) {
    if (lane == 0) {
      for (int64_t j = 0; j < E; ++j)
        pairs[j] = torch_select::Scored{score[j] + b[j], static_cast<int32_t>(j)};
      torch_select::select(pairs, E, k, true);
      for (int64_t j = 0; j < k; ++j) chosen[j] = pairs[j].index;
    }
    __syncwarp();
  }
  const int32_t id = lane < k ? chosen[lane] : -1;
  float w = id >= 0 ? score[id] : 0.0f;
  // torch's order for k = 6 (torch_row_sum, engine/util/torch_topk.h), else index order.
  float sum = 0.0f;
  if (k == 6) {
    float v[6];
    FD_UNROLL
    for (int j = 0; j < 6; ++j) v[j] = __shfl_sync(kFullMask, w, j);
    sum = ((((v[0] + v[4]) + v[5]) + v[1]) + v[2]) + v[3];
  } else {
    for (int j = 0; j < static_cast<int>(k); ++j) sum += __shfl_sync(kFullMask, w, j);
  }
  if (lane < k) {
    if (norm && k > 1) w /= sum + 1e-20f;
    ids[t * k + lane] = id;
    weights[t * k + lane] = w * scale;
  }
}

// Room a row takes in route_rows_kernel's shared memory, in floats: its scores, biased scores,
// torch's pairs and the picks.
__host__ __device__ constexpr int64_t route_rows_room(int64_t E) {
  return 4 * E + kMaxTopK + 1;
}

__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const float* logits, const float* bias, const float* bias_image,
                 const uint8_t* image_rows, int64_t E, int64_t k, float gate_temp, float scale,
                 int norm, int32_t* ids, float* weights) {
  FD_GRID_PROLOGUE();
  FD_DYNAMIC_SMEM(float, score);
  float* biased = score + E;
  __shared__ int32_t chosen[kMaxTopK + 1];
  const int64_t t = blockIdx.x;
  const float* b = (image_rows && image_rows[t] && bias_image) ? bias_image : bias;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    score[e] = route_score(logits[t * E + e], gate_temp);
    biased[e] = score[e] + b[e];
  }
  __syncthreads();
  // The k + 1 best by rank: thread e counts the experts ahead of its own (a larger biased score,
  // or an equal one at a lower index) over the row in shared memory, and a rank <= k puts it in
  // `chosen` at that place. With no two of them equal, torch's sorted topk returns exactly these
  // k in this order. NaN scores take no place and count for no one. One warp finding the k + 1
  // best by repeated warp maxima was a chain of ~1,000 dependent instructions: 13 µs a call on
  // the H200 (Nsight Compute), where every thread counting in parallel reads the row once.
  for (int64_t r = threadIdx.x; r <= k; r += blockDim.x) chosen[r] = -1;
  __syncthreads();
  const int64_t e = threadIdx.x;
  if (e < E && biased[e] == biased[e]) {
    const float mine = biased[e];
    int rank = 0;
    const int64_t e4 = e & ~int64_t{3}, whole = E & ~int64_t{3};
    const float4* quads =
        reinterpret_cast<const float4*>(biased);  // 16-byte aligned: E % 4 == 0 below
    if (E % 4 == 0) {
      // Quads before e's: equal values count (lower indices); after it: only larger ones.
      FD_UNROLL_BY(4)
      for (int64_t j = 0; j < e4; j += 4) {
        const float4 o = quads[j / 4];
        rank += (o.x >= mine) + (o.y >= mine) + (o.z >= mine) + (o.w >= mine);
      }
      FD_UNROLL_BY(4)
      for (int64_t j = e4 + 4; j < whole; j += 4) {
        const float4 o = quads[j / 4];
        rank += (o.x > mine) + (o.y > mine) + (o.z > mine) + (o.w > mine);
      }
      for (int64_t j = e4; j < e4 + 4; ++j)
        if (j != e) rank += j < e ? biased[j] >= mine : biased[j] > mine;
    } else {
      for (int64_t j = 0; j < E; ++j)
        if (j != e) rank += j < e ? biased[j] >= mine : biased[j] > mine;
    }
    if (rank <= k) chosen[rank] = static_cast<int32_t>(e);
  }
  __syncthreads();
  // The first warp finishes (k <= 32: one thread walking the picks was a chain of dependent
  // shared-memory reads).
  if (threadIdx.x >= 32) return;
  finish_route(chosen, score, biased, b, reinterpret_cast<torch_select::Scored*>(biased + E), E, k,
               scale, norm, t, ids, weights);
}

// The same rows a warp each (from kRouteRowsMin rows): lane l holds experts l + 32 j in registers
// and the k + 1 best are taken one at a time by warp maxima (a larger biased score first, an equal
// one at the lower index, NaN never), the order the ranks above give. H200, Nsight Compute, V4.1's
// 384 experts: 8,192 rows 40 us against the block kernel's 237 (E^2 comparisons a row); one row
// 16-18 us against 7.7-9.1 (a chain of k + 1 warp maxima), so decode steps keep the block kernel.
__global__ void __launch_bounds__(32 * kRouteWarps)
    route_rows_kernel(const float* logits, const float* bias, const float* bias_image,
                      const uint8_t* image_rows, int64_t n, int64_t E, int64_t k, float gate_temp,
                      float scale, int norm, int32_t* ids, float* weights) {
  FD_GRID_PROLOGUE();
  FD_DYNAMIC_SMEM(float, smem);
  const int lane = static_cast<int>(threadIdx.x & 31u), warp = static_cast<int>(threadIdx.x >> 5);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= n) return;  // the whole warp: no block barrier follows
  float* score = smem + warp * route_rows_room(E);
  float* biased = score + E;
  auto* pairs = reinterpret_cast<torch_select::Scored*>(biased + E);
  auto* chosen = reinterpret_cast<int32_t*>(pairs + E);
  const float* b = (image_rows && image_rows[t] && bias_image) ? bias_image : bias;
  float v[kRouteValuesPerLane];
  uint32_t live = 0;  // bit j: expert lane + 32 j is in the row, not NaN, not yet taken
  FD_UNROLL
  for (int j = 0; j < kRouteValuesPerLane; ++j) {
    const int64_t e = lane + 32 * j;
    v[j] = 0.0f;
    if (e >= E) continue;
    score[e] = route_score(logits[t * E + e], gate_temp);
    biased[e] = score[e] + b[e];
    v[j] = biased[e];
    if (v[j] == v[j]) live |= 1u << j;
  }
  constexpr int32_t kNone = 0x7FFFFFFF;
  for (int64_t r = 0; r <= k; ++r) {
    float best = 0.0f;
    int32_t at = kNone;  // the expert, kNone for no candidate
    FD_UNROLL
    for (int j = 0; j < kRouteValuesPerLane; ++j)  // ascending index: the first of equals wins
      if (((live >> j) & 1u) != 0u && (at == kNone || v[j] > best)) {
        best = v[j];
        at = lane + 32 * j;
      }
    FD_UNROLL
    for (int o = 16; o >= 1; o >>= 1) {
      const float other = __shfl_xor_sync(kFullMask, best, o);
      const int32_t other_at = __shfl_xor_sync(kFullMask, at, o);
      if (other_at != kNone && (at == kNone || other > best || (other == best && other_at < at))) {
        best = other;
        at = other_at;
      }
    }
    if (lane == 0) chosen[r] = at == kNone ? -1 : at;
    if (at != kNone && (at & 31) == lane) live &= ~(1u << (at >> 5));
  }
  __syncwarp();
  finish_route(chosen, score, biased, b, pairs, E, k, scale, norm, t, ids, weights);
}

// ---- many rows: per-expert GEMMs ----

__global__ void swiglu_rows_kernel(float* g, const float* u, const float* row_weight, int64_t m,
                                   int64_t inter, float limit) {
  FD_GRID_PROLOGUE();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * inter) return;
  float gv = g[i], uv = u[i];
  if (limit > 0.0f) {
    uv = fminf(fmaxf(uv, -limit), limit);
    gv = fminf(gv, limit);
  }
  float a = __fmul_rn(gv / (1.0f + expf(-gv)), uv);
  if (row_weight) a = __fmul_rn(a, row_weight[i / inter]);
  g[i] = round_bf16(a);
}

// out slot rows [slot[i]] = o rows [i] (the per-expert outputs placed for the ordered sum): four
// columns a thread, rows gridDim.y apart (one value a thread with a 64-bit division to find its
// row ran at 0.8 TB/s on a prefill's shared expert). `vec`: dim a multiple of 4, o and out 16-byte
// aligned.
__global__ void place_rows_kernel(const float* o, const int64_t* slots, int64_t m, int64_t dim,
                                  bool vec, float* out) {
  FD_GRID_PROLOGUE();
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (c >= dim) return;
  for (int64_t t = blockIdx.y; t < m; t += gridDim.y) {
    const float* src = o + t * dim + c;
    float* dst = out + slots[t] * dim + c;
    if (vec)
      *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
    else
      for (int64_t e = 0; e < 4 && c + e < dim; ++e) dst[e] = src[e];
  }
}

// The shared expert's tail: the SwiGLU of g and u [n, inter] (into g), then w2 over it into o's
// rows t * o_stride, by `product` (gemv or gemm).
void shared_expert_down(DeviceContext& ctx, float* g, const float* u, int64_t n,
                        const ExpertWeights& ex, float limit, float* o, int64_t o_stride,
                        void (*product)(DeviceContext&, const GemvJob&)) {
  const int64_t inter = ex.w1.out;
  FD_LAUNCH(swiglu_rows_kernel, dim3(blocks_for(n * inter, 256)), dim3(256), 0, ctx.stream(), g, u,
            nullptr, n, inter, limit);
  GemvJob job;
  job.x = g;
  job.x_stride = inter;
  job.n = n;
  job.w = &ex.w2;
  job.out_g = ex.w2.out;
  job.k = inter;
  job.act_quant = true;
  job.y = o;
  job.y_stride = o_stride;
  product(ctx, job);
}

// The shared expert of rows [n, d] as three GEMVs over all rows at once (its weights read once,
// not once per row) with the SwiGLU between: o rows t * o_stride / d.
void shared_expert_rows(DeviceContext& ctx, const float* x, int64_t n, const ExpertWeights& ex,
                        float limit, float* o, int64_t o_stride) {
  const int64_t inter = ex.w1.out;
  Tensor g = ctx.scratch(DType::F32, Shape{n, inter}), u = ctx.scratch(DType::F32, Shape{n, inter});
  run_linear(ctx, x, n, ex.w1, kQuantLinear, ptr<float>(g));
  run_linear(ctx, x, n, ex.w3, kQuantLinear, ptr<float>(u));
  shared_expert_down(ctx, ptr<float>(g), ptr<const float>(u), n, ex, limit, o, o_stride, gemv);
}

// The shared expert of a prefill's rows [n, d] on cuBLAS, its output into o's rows t * o_stride
// (each row's shared slot): w1 and w3 read the rows act_quant'ed once into xq (BF16, the routed
// experts' input too), w2 writes the slots in place. Each product was a linear of its own over a
// copy of x, staged twice, and its output placed into the slots after it (8K rows: two stagings
// of 62 us, a copy and a placing of 168 MB).
void shared_expert_gemms(DeviceContext& ctx, const uint16_t* xq, int64_t n, const ExpertWeights& ex,
                         float limit, float* o, int64_t o_stride) {
  const int64_t inter = ex.w1.out, d = ex.w1.in;
  Tensor g = ctx.scratch(DType::F32, Shape{n, inter}), u = ctx.scratch(DType::F32, Shape{n, inter});
  GemvJob job;
  job.x_bf16 = xq;
  job.x_stride = d;
  job.n = n;
  job.out_g = inter;
  job.k = d;
  job.act_quant = true;
  job.y_stride = inter;
  job.w = &ex.w1;
  job.y = ptr<float>(g);
  gemm(ctx, job);
  job.w = &ex.w3;
  job.y = ptr<float>(u);
  gemm(ctx, job);
  shared_expert_down(ctx, ptr<float>(g), ptr<const float>(u), n, ex, limit, o, o_stride, gemm);
}

ExpertEntry entry_of(const ExpertWeights* ex) {
  ExpertEntry e{};
  if (!ex) return e;
  const LinearWeight* m[3] = {&ex->w1, &ex->w3, &ex->w2};
  for (int j = 0; j < 3; ++j) {
    e.data[j] = m[j]->data.bytes();
    e.scale[j] = m[j]->scale.defined() ? m[j]->scale.bytes() : nullptr;
    e.scale_cols[j] = m[j]->scale.defined() ? m[j]->scale.dim(1) : 0;
    e.format[j] = static_cast<int32_t>(m[j]->format);
  }
  e.inter = ex->w1.out;
  e.dim = ex->w1.in;
  return e;
}

}  // namespace
}  // namespace cuda

using cuda::blocks_for;
using cuda::ptr;

void CudaBackend::moe_route(const Tensor& logits, const Tensor& bias, const Tensor* bias_image,
                            std::span<const uint8_t> image_rows, const RouteSettings& s,
                            Tensor& ids, Tensor& weights) {
  const int64_t n = logits.rows(), E = logits.dim(1), k = s.topk;
  check_shape(bias, Shape{E}, "moe bias");
  check_shape(ids, Shape{n, k}, "moe ids");
  check_shape(weights, Shape{n, k}, "moe weights");
  FD_CHECK(k <= E, "moe: more experts per token than experts");
  FD_CHECK(E <= cuda::kMaxRouteExperts && k <= cuda::kMaxTopK,
           "moe: the CUDA router takes at most 512 experts and 32 per token");
  FD_CHECK(image_rows.empty() || static_cast<int64_t>(image_rows.size()) == n,
           "moe: one image flag per row");
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  Tensor image;
  if (!image_rows.empty()) image = ctx_->upload_span(image_rows, DType::U8);
  if (n >= cuda::kRouteRowsMin) {
    FD_LAUNCH(cuda::route_rows_kernel,
              dim3(static_cast<unsigned>((n + cuda::kRouteWarps - 1) / cuda::kRouteWarps)),
              dim3(32 * cuda::kRouteWarps),
              static_cast<size_t>(cuda::kRouteWarps * cuda::route_rows_room(E)) * sizeof(float),
              ctx_->stream(), ptr<const float>(logits), ptr<const float>(bias),
              bias_image ? ptr<const float>(*bias_image) : nullptr,
              image.defined() ? ptr<const uint8_t>(image) : nullptr, n, E, k, s.gate_temp,
              s.route_scale, static_cast<int>(s.norm_topk_prob), ptr<int32_t>(ids),
              ptr<float>(weights));
    return;
  }
  FD_LAUNCH(cuda::route_kernel, dim3(static_cast<unsigned>(n)), dim3(cuda::kRouteThreads),
            static_cast<size_t>(2 * E) * sizeof(float) +
                static_cast<size_t>(E) * sizeof(torch_select::Scored),
            ctx_->stream(), ptr<const float>(logits), ptr<const float>(bias),
            bias_image ? ptr<const float>(*bias_image) : nullptr,
            image.defined() ? ptr<const uint8_t>(image) : nullptr, E, k, s.gate_temp, s.route_scale,
            static_cast<int>(s.norm_topk_prob), ptr<int32_t>(ids), ptr<float>(weights));
}

void CudaBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                              std::span<const ExpertWeights* const> experts,
                              const ExpertWeights* shared, float swiglu_limit, Tensor& y) {
  moe_experts_with(x, ids, weights, experts, shared, nullptr, swiglu_limit, y);
}

void CudaBackend::moe_experts_rounded(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                      std::span<const ExpertWeights* const> experts,
                                      const ExpertWeights* shared, float swiglu_limit, Tensor& y) {
  if (!fuse_)
    return Backend::moe_experts_rounded(x, ids, weights, experts, shared, swiglu_limit, y);
  moe_experts_with(x, ids, weights, experts, shared, nullptr, swiglu_limit, y, /*round=*/true);
}

bool CudaBackend::shared_expert_beside_router(const ExpertWeights& shared, int64_t rows) const {
  const cuda::ExpertEntry entry = cuda::entry_of(&shared);
  return shared_ahead_ && decode_experts_tc_ && rows <= cuda::kGemvTokens &&
         rows < cuda::kSharedApartRows && shared.w1.in <= cuda::kMaxExpertCols &&
         shared.w1.out <= cuda::kMaxExpertCols && !shared.w1.data.host_accessible() &&
         cuda::decode_experts_tc_fit(std::span<const cuda::ExpertEntry>(&entry, 1));
}

void CudaBackend::moe_shared_expert(const Tensor& x, const ExpertWeights& shared,
                                    float swiglu_limit, Tensor& y) {
  const int64_t n = x.rows(), d = x.dim(1);
  check_shape(y, Shape{n, d}, "moe shared term");
  if (!shared_expert_beside_router(shared, n))
    return Backend::moe_shared_expert(x, shared, swiglu_limit, y);
  if (n == 0) return;
  FD_CHECK(shared.w1.in == d && shared.w2.out == d, "moe: the shared expert does not match x");
  cuda::DeviceGuard g(ctx_->device());
  // The shared expert as the only slot of each row (no routed column), in parts over K that
  // fill about a wave of the up kernel (alone in half a wave it streamed at 1.0-1.4 TB/s and
  // held the routed experts back); its output rows are y itself (no sum: the term is the
  // slot's output, as moe_experts adds it).
  const cuda::ExpertEntry entry = cuda::entry_of(&shared);
  Tensor table = ctx_->upload_cached(&shared, &entry, sizeof(entry));
  const int64_t pairs = (shared.w1.out + 31) / 32;
  const int64_t capacity = 4 * static_cast<int64_t>(ctx_->multiprocessors());
  const int64_t parts = std::clamp<int64_t>(capacity / std::max<int64_t>(1, pairs * n), 1, 8);
  const cuda::SlotArgs a{.table = ptr<const cuda::ExpertEntry>(table),
                         .ids = nullptr,
                         .weights = nullptr,
                         .n = n,
                         .k = 0,
                         .slots_per_row = 1,
                         .n_routed = 0,
                         .has_shared = 1,
                         .limit = swiglu_limit,
                         .parts_per_row = parts,
                         .shared_parts = parts};
  cuda::run_decode_experts_tc(*ctx_, a, ptr<const float>(x), d, shared.w1.out, ptr<float>(y),
                              nullptr);
}

void CudaBackend::moe_routed_experts_plus(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                          std::span<const ExpertWeights* const> experts,
                                          const Tensor& shared_y, float swiglu_limit, Tensor& y) {
  check_shape(shared_y, y.shape(), "moe shared term");
  check_dtype(shared_y, DType::F32, "moe shared term");
  moe_experts_with(x, ids, weights, experts, nullptr, &shared_y, swiglu_limit, y);
}

void CudaBackend::moe_experts_with(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                   std::span<const ExpertWeights* const> experts,
                                   const ExpertWeights* shared, const Tensor* shared_y,
                                   float swiglu_limit, Tensor& y, bool round) {
  const int64_t n = x.rows(), d = x.dim(1), k = ids.dim(1);
  const int64_t E = static_cast<int64_t>(experts.size());
  check_shape(y, Shape{n, d}, "moe out");
  check_shape(weights, ids.shape(), "moe weights");
  check_dtype(ids, DType::I32, "moe ids");
  FD_CHECK(k <= cuda::kMaxTopK, "moe: more than 32 experts per token");
  if (n == 0) return;
  // A layer's routed experts are all in host memory or all on the device (moe_experts_on_host
  // checks): the first present one says which.
  const auto first = std::find_if(experts.begin(), experts.end(),
                                  [](const ExpertWeights* ex) { return ex != nullptr; });
  if (first != experts.end() && (*first)->w1.data.host_accessible()) {
    moe_experts_on_host(x, ids, weights, experts, shared, shared_y, swiglu_limit, y);
    if (round) round_bf16(y);
    return;
  }
  cuda::DeviceGuard g(ctx_->device());
  // The pointer table (uploaded again only when the experts change).
  std::vector<cuda::ExpertEntry> table(static_cast<size_t>(E + 1));
  int64_t max_inter = 0;
  for (int64_t e = 0; e <= E; ++e) {
    const ExpertWeights* ex = e < E ? experts[static_cast<size_t>(e)] : shared;
    table[static_cast<size_t>(e)] = cuda::entry_of(ex);
    if (ex) {
      FD_CHECK(ex->w1.in == d && ex->w2.out == d && ex->w3.out == ex->w1.out,
               "moe: expert " + std::to_string(e) + " does not match the activation width");
      max_inter = std::max(max_inter, ex->w1.out);
    }
  }
  const int64_t slots_per_row = k + (shared ? 1 : 0);
  const bool grouped =
      n <= cuda::kGemvTokens && d <= cuda::kMaxExpertCols && max_inter <= cuda::kMaxExpertCols;
  const bool shared_apart = grouped && shared && n >= cuda::kSharedApartRows;
  // The grouped slots on the tensor cores where every matrix fits them (moe_decode_tc.cuh); else
  // on the CUDA cores.
  const bool decode_tc = grouped && decode_experts_tc_ && cuda::decode_experts_tc_fit(table);
  // The shared expert's slot in parts of about a routed expert's bytes (SlotArgs): on the tensor
  // cores each part takes a share of K (split_shared_tc_), on the CUDA cores a share of the rows
  // (opt-in, balance_shared_expert_).
  int64_t shared_parts = 1;
  if (shared && !shared_apart && first != experts.end() &&
      (decode_tc ? split_shared_tc_ : balance_shared_expert_)) {
    const double ratio = static_cast<double>(shared->w1.data.nbytes()) /
                         static_cast<double>(std::max<size_t>((*first)->w1.data.nbytes(), 1));
    shared_parts = std::clamp<int64_t>(std::llround(ratio), 1, decode_tc ? 4 : 8);
  }
  Tensor o = ctx_->scratch(DType::F32, Shape{n * slots_per_row, d});
  // Keyed by the layer's expert list, or by its shared expert where no routed expert is here (a
  // caller's list of none, made for the call: its address is no key).
  const void* owner = first != experts.end() ? static_cast<const void*>(experts.data()) : shared;
  Tensor dev_table = ctx_->upload_cached(owner, table.data(), table.size() * sizeof(table[0]));
  cuda::SlotArgs a{ptr<const cuda::ExpertEntry>(dev_table),
                   ptr<const int32_t>(ids),
                   ptr<const float>(weights),
                   n,
                   k,
                   slots_per_row,
                   E,
                   shared != nullptr,
                   swiglu_limit,
                   shared_apart || !shared ? k : k + shared_parts,
                   shared_parts,
                   shared_y ? ptr<const float>(*shared_y) : nullptr,
                   round ? 1 : 0};
  // The tensor-core down kernel sums the rows itself where every slot is in its grid.
  const bool summed = decode_tc && !shared_apart;
  if (decode_tc) {
    cuda::run_decode_experts_tc(*ctx_, a, ptr<const float>(x), d, max_inter, ptr<float>(o),
                                summed ? ptr<float>(y) : nullptr);
  } else if (grouped) {
    // About a wave of blocks: each stages its slot's row once for its share of its part's row
    // tiles (parts: about a routed expert's bytes each, so the blocks finish together).
    const int64_t parts = n * a.parts_per_row;
    const int64_t capacity = cuda::kGemvBlocksPerSm * static_cast<int64_t>(ctx_->multiprocessors());
    const int64_t up_tiles = blocks_for(max_inter, cuda::kGemvWarps * cuda::kUpRows);
    const int64_t down_tiles = blocks_for(d, cuda::kGemvWarps * cuda::kDownRows);
    // One part a slot (the default): tile_blocks evens the blocks' tile counts, as measured.
    // Balanced parts (opt-in): the same with the parts measured slower (expert up 53.6 -> 61.1
    // µs: fewer blocks, fewer bytes in flight), so they fill a whole wave instead; that form has
    // run on the emulator only (docs/cuda-backend.md).
    const auto blocks_for_tiles = [&](int64_t tiles) {
      if (shared_parts == 1)
        return static_cast<unsigned>(cuda::tile_blocks(tiles, parts, capacity));
      return static_cast<unsigned>(
          std::clamp<int64_t>(capacity / parts, 1, std::max<int64_t>(1, tiles / shared_parts)));
    };
    const unsigned up_blocks = blocks_for_tiles(up_tiles),
                   down_blocks = blocks_for_tiles(down_tiles);
    Tensor h = ctx_->scratch(DType::F32, Shape{n * slots_per_row, max_inter});
    FD_LAUNCH(cuda::expert_up_kernel, dim3(up_blocks, static_cast<unsigned>(parts)),
              dim3(cuda::kGemvThreads), 0, ctx_->stream(), a, ptr<const float>(x), max_inter,
              ptr<float>(h));
    FD_LAUNCH(cuda::expert_down_kernel, dim3(down_blocks, static_cast<unsigned>(parts)),
              dim3(cuda::kGemvThreads), 0, ctx_->stream(), a, ptr<const float>(h), max_inter, d,
              ptr<float>(o));
  }
  if (shared_apart)
    cuda::shared_expert_rows(*ctx_, ptr<const float>(x), n, *shared, swiglu_limit,
                             ptr<float>(o) + k * d, slots_per_row * d);
  if (!grouped) {
    // Every routed expert in one launch per stage on the tensor cores where the formats allow,
    // grouped on the device; else per-expert GEMMs, whose rows need the ids on the host.
    const bool tensor_cores = grouped_moe_ && cuda::grouped_experts_fit(table, E, d);
    // The rows act_quant'ed once for the routed experts' kernels and the shared expert's products
    // where both take them staged (the shared expert's weights not F32).
    const bool shared_staged =
        shared && shared->w1.format != WeightFormat::F32 && shared->w3.format != WeightFormat::F32;
    Tensor xq;
    if (tensor_cores || shared_staged) {
      xq = ctx_->scratch(DType::BF16, Shape{n, d});
      cuda::act_quant_to_bf16(*ctx_, ptr<const float>(x), n, d, ptr<uint16_t>(xq));
    }
    if (shared_staged)
      cuda::shared_expert_gemms(*ctx_, ptr<const uint16_t>(xq), n, *shared, swiglu_limit,
                                ptr<float>(o) + k * d, slots_per_row * d);
    std::vector<int32_t> host_ids;
    std::vector<float> host_w;
    if (tensor_cores) {
      cuda::run_grouped_experts(*ctx_, ptr<const cuda::ExpertEntry>(dev_table),
                                ptr<const int32_t>(ids), ptr<const float>(weights), k,
                                slots_per_row, E, ptr<const uint16_t>(xq), n, d, table[0].inter,
                                swiglu_limit, ptr<float>(o));
    } else {
      host_ids.resize(static_cast<size_t>(n * k));
      host_w.resize(static_cast<size_t>(n * k));
      read(ids, host_ids.data(), host_ids.size() * 4);
      read(weights, host_w.data(), host_w.size() * 4);
      for (int32_t id : host_ids) FD_CHECK(id >= 0 && id < E, "moe: expert id out of range");
    }
    auto run = [&](const ExpertWeights& ex, const std::vector<int64_t>& rows,
                   const std::vector<float>* row_weight, const std::vector<int64_t>& slot_rows) {
      const int64_t m = static_cast<int64_t>(rows.size()), inter = ex.w1.out;
      Tensor xs = ctx_->scratch(DType::F32, Shape{m, d});
      gather_rows(x, rows, xs);
      Tensor gt = ctx_->scratch(DType::F32, Shape{m, inter});
      Tensor ut = ctx_->scratch(DType::F32, Shape{m, inter});
      cuda::run_linear(*ctx_, ptr<const float>(xs), m, ex.w1, kQuantLinear, ptr<float>(gt));
      cuda::run_linear(*ctx_, ptr<const float>(xs), m, ex.w3, kQuantLinear, ptr<float>(ut));
      Tensor rw;
      if (row_weight) rw = ctx_->upload_span(std::span<const float>(*row_weight), DType::F32);
      FD_LAUNCH(cuda::swiglu_rows_kernel, dim3(blocks_for(m * inter, 256)), dim3(256), 0,
                ctx_->stream(), ptr<float>(gt), ptr<const float>(ut),
                rw.defined() ? ptr<const float>(rw) : nullptr, m, inter, swiglu_limit);
      Tensor out = ctx_->scratch(DType::F32, Shape{m, d});
      cuda::run_linear(*ctx_, ptr<const float>(gt), m, ex.w2, kQuantLinear, ptr<float>(out));
      Tensor dst = ctx_->upload_span(std::span<const int64_t>(slot_rows), DType::I64);
      FD_LAUNCH(cuda::place_rows_kernel, cuda::four_column_grid(m, d), dim3(256), 0, ctx_->stream(),
                ptr<const float>(out), ptr<const int64_t>(dst), m, d,
                d % 4 == 0 && cuda::aligned16(out.bytes()) && cuda::aligned16(o.bytes()),
                ptr<float>(o));
    };
    std::vector<int64_t> rows, slot_rows;
    std::vector<float> row_weight;
    for (int64_t e = 0; e < E && !tensor_cores; ++e) {
      rows.clear();
      slot_rows.clear();
      row_weight.clear();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          if (host_ids[static_cast<size_t>(i * k + j)] == e) {
            rows.push_back(i);
            slot_rows.push_back(i * slots_per_row + j);
            row_weight.push_back(host_w[static_cast<size_t>(i * k + j)]);
          }
      if (!rows.empty() && experts[static_cast<size_t>(e)])
        run(*experts[static_cast<size_t>(e)], rows, &row_weight, slot_rows);
    }
    if (shared && !shared_staged) {
      rows.resize(static_cast<size_t>(n));
      slot_rows.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        rows[static_cast<size_t>(i)] = i;
        slot_rows[static_cast<size_t>(i)] = i * slots_per_row + k;
      }
      run(*shared, rows, nullptr, slot_rows);
    }
  }
  if (!summed) {
    const bool vec = d % 4 == 0 && cuda::aligned16(o.bytes()) && cuda::aligned16(y.bytes()) &&
                     (a.shared_out == nullptr || cuda::aligned16(a.shared_out));
    const dim3 grid(static_cast<unsigned>(blocks_for(vec ? d / 4 : d, 256)),
                    static_cast<unsigned>(n));
    if (vec)
      FD_LAUNCH(cuda::expert_sum_kernel<true>, grid, dim3(256), 0, ctx_->stream(), a,
                ptr<const float>(o), d, ptr<float>(y));
    else
      FD_LAUNCH(cuda::expert_sum_kernel<false>, grid, dim3(256), 0, ctx_->stream(), a,
                ptr<const float>(o), d, ptr<float>(y));
  }
}

void CudaBackend::moe_experts_on_host(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                      std::span<const ExpertWeights* const> experts,
                                      const ExpertWeights* shared, const Tensor* shared_y,
                                      float swiglu_limit, Tensor& y) {
  for (const ExpertWeights* ex : experts)
    FD_CHECK(!ex || ex->w1.data.host_accessible(),
             "moe: a layer's routed experts must all be in host memory or all on the device");
  Backend& host = host_backend();
  ++host_moe_calls_;
  auto to_host = [&](const Tensor& t) {
    Tensor h = host.alloc(t.dtype(), t.shape());
    read(t, h.bytes(), h.nbytes());
    return h;
  };
  const Tensor xh = to_host(x), idh = to_host(ids), wh = to_host(weights);
  // The shared expert's term in y: alone on the device (every routed entry skipped: y = 0 +
  // shared), queued before the CPU starts on the routed experts so the two run at once, or the
  // term computed ahead. The routed sum is then added before it, as the definition orders them.
  if (shared) {
    const std::vector<const ExpertWeights*> none(experts.size(), nullptr);
    moe_experts(x, ids, weights, none, shared, swiglu_limit, y);
    ctx_->step_cut();  // inside a step graph, the shared expert would otherwise wait for the CPU
  } else if (shared_y) {
    copy(*shared_y, y);
  }
  Tensor yh = host.alloc(DType::F32, y.shape());
  host.moe_experts(xh, idh, wh, experts, nullptr, swiglu_limit, yh);  // the routed sum
  if (!shared && !shared_y) {
    write(y, yh.bytes(), yh.nbytes());
    return;
  }
  cuda::DeviceGuard g(ctx_->device());
  Tensor routed = ctx_->scratch(DType::F32, y.shape());
  write(routed, yh.bytes(), yh.nbytes());
  FD_LAUNCH(cuda::add_routed_kernel, dim3(blocks_for(y.numel(), 256)), dim3(256), 0, ctx_->stream(),
            ptr<const float>(routed), y.numel(), ptr<float>(y));
}

}  // namespace flashdesk
