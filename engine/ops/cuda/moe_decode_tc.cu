// The decode experts on the tensor cores (moe_decode_tc.cuh), three launches a step:
//   quantize_acts_kernel: x's rows act_quant'ed once (E4M3 values as FP16, in the B fragments'
//     order) instead of by every block (the first form staged them per block: 25% of its
//     instructions, a division per value);
//   expert_tc_kernel<up>: a block runs one slot's two tiles of 16 inter rows with eight warps, warp
//     w taking tile w / 4 and quarter w % 4 of the K units (every fourth unit from unit w % 4 by
//     default: UnitSeq in tc_codes.cuh), so a tile's bytes are in flight from four warps at
//     once; per 32-column block two mma per matrix (A = 16 weight rows, lane L rows L/4 and
//     L/4 + 8; B = the activation in column 0, the other seven columns zero); the
//     quarters' sums meet in shared memory in quarter order; the SwiGLU rows of the block (one
//     32-column block of h) are act_quant'ed there for the down kernel;
//   expert_tc_kernel<down>: the same over w2's dim rows, into o, by default with two warps a
//     tile (four warps, 128 threads, a block: DeviceContext::down_split()).
// mma.sync with E4M3 inputs, tried first, is not a Hopper instruction: sm_90 runs it as FP16
// products after converting both operands (F2FP), and it was slower than the CUDA-core kernels.
#include "engine/ops/cuda/moe_decode_tc.cuh"
#include "engine/ops/cuda/moe_decode_tc_units.cuh"

namespace flashdesk::cuda {
namespace {

using namespace decode_tc;

constexpr int kTcThreads = 256;

// ---- activations ----

// x [rows, k] (row stride k) into `out`, a warp per 32-column block.
__global__ void quantize_acts_kernel(const float* x, int64_t rows, int64_t k, TcActs out) {
  // Wait, then let the next grid launch: the up kernel reads the router's ids before its own
  // wait (expert_tc_kernel), which is safe only once this kernel's predecessors have completed.
  fd_wait_prior_grid();
  fd_allow_dependents();
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (w >= rows * (k / 32)) return;  // whole warps
  const int64_t row = w / (k / 32), b = w % (k / 32);
  quantize_block(x[row * k + b * 32 + (threadIdx.x & 31u)], out.values + row * k + b * 32,
                 out.scales + row * (k / 32) + b);
}

// Where the down kernel sums a row's slots (y null: it does not; expert_sum_kernel does).
struct RowSums {
  float* y;        // [n, dim]
  unsigned* done;  // [n, column blocks] arrival counters, zero
};

// The last of a row's slot blocks at this block's 32 columns to finish (every part of every slot
// of the row is a block of the grid) sums the row's slot outputs there into y, in
// expert_sum_kernel's order and with its values: one launch a decode step fewer. Warp 0.
__device__ void sum_row_when_last(const SlotArgs& a, const RowSums& s, int64_t slot, const float* o,
                                  int64_t dim) {
  __shared__ int32_t order[kMaxTopK];
  const unsigned lane = threadIdx.x & 31u;
  const int64_t t = slot / a.slots_per_row;
  if (!warp_arrives_last(s.done + t * gridDim.x + blockIdx.x,
                         static_cast<unsigned>(a.parts_per_row)))
    return;
  rank_row_slots(a, t, order);
  const int64_t d = static_cast<int64_t>(blockIdx.x) * kBlockRows + lane;
  if (d < dim) {
    float sum[1];
    ordered_slot_sums(a, order, o + t * a.slots_per_row * dim + d, dim, t, d, sum);
    s.y[t * dim + d] = sum[0];
  }
}

// Where the parts of a slot split over K (the FP8 shared expert, PartSums) leave their sums: the
// last of a tile pair's parts to finish adds them in part order and carries on as a whole slot.
struct PartSums {
  float* partial;  // [n, parts, M, rows rounded up to kBlockRows]
  unsigned* done;  // [n, tile pairs] arrival counters, zero
};

// grid (tile pairs, slot parts). kUp: the gate and up rows (w1, w3) of inter rows against x's row
// (`in`, rows of in_stride values), SwiGLU, act_quant'ed into h (rows of h_stride values); else the
// down rows (w2) of dim rows against h's slot row (`in`), into o [slots, dim], and the rows' sums
// into sums.y where that is set. A slot in several parts (a.shared_parts: the FP8 shared
// expert, whose rows are twice a routed FP4 expert's bytes) has each part take its share of the
// K units; its blocks then stream what a routed slot's do, where one part a slot left the up
// kernel's single wave waiting on the shared expert's blocks. Q: the warps splitting each of the
// block's two tiles over K (a block of 2 Q warps).
//
// interleave: a tile's K units go to its Q warps interleaved, else as contiguous ranges (UnitSeq).
//
// early: the weights' first units are issued before the wait for the previous grid (programmatic
// dependent launch, cuda_compat.cuh), so they load while that grid finishes. They are chosen by
// the router's ids, written two grids back for the up kernel (the router, then
// quantize_acts_kernel) and three for the down kernel; both predecessors let this grid launch
// only after their own wait, so by the time it runs the router has completed.
template <bool kUp, int Ring, int kBlocks, int Q>
__global__ void __launch_bounds__(kTilesPerBlock* Q * 32, kBlocks)
    expert_tc_kernel(SlotArgs a, TcActs in, int64_t in_stride, int64_t dim, TcActs h,
                     int64_t h_stride, float* o, RowSums sums, PartSums parts, int early,
                     int interleave) {
  constexpr int M = kUp ? 2 : 1;
  constexpr int kThreads = kTilesPerBlock * Q * 32;
  // Wait, then let the next grid launch (the down kernel reads the ids before its wait).
  const auto wait_then_allow = [] {
    fd_wait_prior_grid();
    fd_allow_dependents();
  };
  if (!early) wait_then_allow();
  __shared__ float quarter_sums[kTilesPerBlock][Q][M][kTileRows];
  // Dynamic: the rings (ring_bytes<M>(Ring, warps)), then the activation row's values and scales
  // (act_bytes(in_stride): sized by K, so that kBlocks blocks fit a multiprocessor).
  FD_DYNAMIC_SMEM(uint8_t, rings);
  uint16_t* act = reinterpret_cast<uint16_t*>(rings + ring_bytes<M>(Ring, kTilesPerBlock * Q));
  float* act_scale = reinterpret_cast<float*>(act + in_stride);
  const SlotPart sp = grouped_slot(a);
  const int64_t slot = sp.slot;
  float weight;
  const int64_t e = slot_expert(a, slot, &weight);
  const ExpertEntry& ex = a.table[e];
  const int64_t rows = kUp ? ex.inter : dim, k = kUp ? ex.dim : ex.inter;
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  // Whole blocks: another device's expert, or no tile left for this block (still counted in
  // where the down kernel sums the rows).
  if (ex.data[0] == nullptr || static_cast<int64_t>(blockIdx.x) * kTilesPerBlock >= tiles) {
    if (early) wait_then_allow();
    if (!kUp && sums.y != nullptr && threadIdx.x < 32) sum_row_when_last(a, sums, slot, o, dim);
    return;
  }
  const int64_t act_row_index = kUp ? slot / a.slots_per_row : slot;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const int tl = static_cast<int>(warp) / Q, quarter = static_cast<int>(warp) % Q;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kTilesPerBlock + tl;
  const bool fp4 = static_cast<WeightFormat>(ex.format[kUp ? 0 : 2]) == WeightFormat::Fp4Row;
  // This part's K units, then this warp's quarter of them.
  const int64_t units = k / (fp4 ? 128 : 64), p0 = sp.part * units / sp.parts,
                p1 = (sp.part + 1) * units / sp.parts;
  UnitSeq us = warp_units(p0, p1, quarter, Q, interleave != 0);
  if (tile >= tiles) us.count = 0;
  uint8_t* ring = rings + warp * (Ring * unit_bytes<M>());
  // The activation row into shared memory once the ring's first units are in flight (read from
  // global memory where each block's product needed it, its latency stalled every block: Nsight
  // Compute had the down kernel's warps waiting on it most of the time). It is the previous
  // grid's output, so its copies wait for that grid where the weights did not.
  const uint16_t* act_row = in.values + act_row_index * in_stride;
  const auto act_ready = [&] {
    if (early) wait_then_allow();
    for (int64_t c = threadIdx.x * 8; c < k; c += kThreads * 8) async_copy16(act + c, act_row + c);
    for (int64_t b = threadIdx.x; b < k / 32; b += kThreads)
      act_scale[b] = in.scales[act_row_index * (in_stride / 32) + b];
    async_commit();
    async_wait<0>();
    __syncthreads();
  };
  float acc[M][2] = {};
  LaneRows<M> lr;
  FD_UNROLL
  for (int m = 0; m < M; ++m) {
    FD_UNROLL
    for (int hh = 0; hh < 2; ++hh) {
      const uint8_t* unused;
      lane_row(ex, kUp ? m : 2, tile * kTileRows + copy_row() + 8 * hh, rows, k, &lr.row[m][hh],
               &unused);
      lane_row(ex, kUp ? m : 2, tile * kTileRows + lane / 4 + 8 * hh, rows, k, &unused,
               &lr.scale[m][hh]);
    }
  }
  bool streamed = false;
  with_format(ex.format[kUp ? 0 : 2], [&]<WeightFormat F>() {
    if constexpr (kTcFormat<F>) {
      // A warp past the last tile (rows null) streams no units but holds the barrier.
      tile_sums<F, M, Ring>(lr, us, act, act_scale, ring, acc, act_ready);
      streamed = true;
    }
  });
  if (!streamed) act_ready();
  if ((lane & 3u) == 0) {
    FD_UNROLL
    for (int m = 0; m < M; ++m) {
      FD_UNROLL
      for (int hh = 0; hh < 2; ++hh) quarter_sums[tl][quarter][m][lane / 4 + 8 * hh] = acc[m][hh];
    }
  }
  __syncthreads();
  if (warp != 0) return;
  // Warp 0: the block's 32 rows, lane L row 32 blockIdx.x + L.
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlockRows + lane;
  float sum[M];
  FD_UNROLL
  for (int m = 0; m < M; ++m) {
    sum[m] = 0.0f;
    for (int s = 0; s < Q; ++s) sum[m] += quarter_sums[lane / kTileRows][s][m][lane % 16];
  }
  if (sp.parts > 1) {
    // This part's sums out; the tile pair's last part adds the parts' in part order.
    const int64_t t = slot / a.slots_per_row, padded = gridDim.x * kBlockRows;
    const auto partial = [&](int64_t p, int m) {
      return parts.partial + ((t * sp.parts + p) * M + m) * padded + i;
    };
    FD_UNROLL
    for (int m = 0; m < M; ++m) __stcg(partial(sp.part, m), sum[m]);
    if (!warp_arrives_last(parts.done + t * gridDim.x + blockIdx.x,
                           static_cast<unsigned>(sp.parts))) {
      if (!kUp && sums.y != nullptr) sum_row_when_last(a, sums, slot, o, dim);
      return;
    }
    FD_UNROLL
    for (int m = 0; m < M; ++m) {
      sum[m] = 0.0f;
      for (int64_t p = 0; p < sp.parts; ++p) sum[m] += __ldcg(partial(p, m));
    }
  }
  if constexpr (kUp) {
    swiglu_block(a, e, weight, rows, blockIdx.x, slot, sum, h, h_stride);
  } else {
    if (i < rows) o[slot * dim + i] = round_bf16(sum[0]);
    if (sums.y != nullptr) sum_row_when_last(a, sums, slot, o, dim);
  }
}

}  // namespace

void quantize_acts_tc(DeviceContext& ctx, const float* x, int64_t rows, int64_t k, TcActs out) {
  if (rows * k == 0) return;
  FD_LAUNCH(quantize_acts_kernel, dim3(blocks_for(rows * (k / 32) * 32, kTcThreads)),
            dim3(kTcThreads), 0, ctx.stream(), x, rows, k, out);
}

bool decode_experts_tc_fit(std::span<const ExpertEntry> table) {
  for (const ExpertEntry& e : table) {
    if (e.data[0] == nullptr) continue;
    for (int m = 0; m < 3; ++m) {
      const auto f = static_cast<WeightFormat>(e.format[m]);
      const int64_t k = m == 2 ? e.inter : e.dim;
      const bool fp4 = f == WeightFormat::Fp4Row;
      // Whole units of 64 bytes a row; FP4 scale rows read a word (4 blocks) at a time.
      if ((!fp4 && f != WeightFormat::Fp8Block) || e.scale[m] == nullptr ||
          k % (fp4 ? 128 : 64) != 0 || k > kMaxTcCols ||
          reinterpret_cast<uintptr_t>(e.data[m]) % 16 != 0 ||
          (fp4 && (e.scale_cols[m] % 4 != 0 || reinterpret_cast<uintptr_t>(e.scale[m]) % 4 != 0)))
        return false;
    }
  }
  return true;
}

template <bool kUp, int Ring, int kBlocks, int Q>
void launch_expert_tc(DeviceContext& ctx, const SlotArgs& a, TcActs in, int64_t in_stride,
                      int64_t dim, TcActs h, int64_t h_stride, float* o, RowSums sums,
                      PartSums parts, unsigned tile_pairs, unsigned slots) {
  constexpr int kWarps = kTilesPerBlock * Q;
  constexpr int M = kUp ? 2 : 1;
  const int smem = ring_bytes<M>(Ring, kWarps) + act_bytes(in_stride);
  allow_dynamic_smem<expert_tc_kernel<kUp, Ring, kBlocks, Q>>(static_cast<size_t>(smem));
  const int early = gemv_weights_before_wait() ? 1 : 0;
  const int interleave = ctx.interleaved_units() ? 1 : 0;
  FD_LAUNCH((expert_tc_kernel<kUp, Ring, kBlocks, Q>), dim3(tile_pairs, slots), dim3(kWarps * 32),
            static_cast<size_t>(smem), ctx.stream(), a, in, in_stride, dim, h, h_stride, o, sums,
            parts, early, interleave);
}

// One row: the up kernel four blocks a multiprocessor with rings 2 deep (its 504 blocks of a
// V4.1 step then one wave instead of 1.27 at three blocks; 576 since the shared slot runs in two
// parts, 1.09 waves): H200, a MoE step 96.4 -> 93.2 µs. More
// rows: three blocks and deeper up rings (eight rows: 429.5 against 437.1 µs at four blocks).
// The up kernel's tiles split over K by two warps (128 threads, five blocks a multiprocessor,
// rings 3 deep) measured slower: 96.3-96.7 against 89.5-89.9 µs a one-row step.
// The down kernel's tiles split over K by two warps, eight blocks a multiprocessor at one row
// (ten since the thirtieth session, below; six at more): each warp streams twice the units (a V4.1
// row of w2 is 18) and the 1,280 blocks of a one-row step take 1.2 waves instead of 2.4. H200, a
// MoE step against four warps: 89.5-90.1 against 93.5-94.2 µs at one row, 415-416 against 449-450
// at eight; one warp a tile (sixteen blocks) 99.0. Ten 128-thread blocks a multiprocessor (the
// default since the thirtieth session; FLASHDESK_CUDA_DOWN_BLOCKS=8 for eight) take the one-row
// down kernel's 1,280 blocks of a V4.1 step in one wave on 132 multiprocessors, instead of 1.21
// waves of eight: 48 registers a thread without spills (ptxas, sm_90), rings 3 deep instead of 4 so
// that ten fit the shared memory. H200, two rounds: the 40 layers 10.41 / 10.53 against 10.67
// / 10.69 ms a token, a MoE step 80.9 against 82.6 µs. The up kernel's 576 blocks (six routed slots
// and the shared one in two parts, 72 tile pairs each; 1.09 waves of four blocks) in one wave of
// five blocks of three warps a tile (192 threads) measured slower in the same call: 10.75 / 10.76
// ms, a MoE step 86.7.
void launch_experts_tc(DeviceContext& ctx, const SlotArgs& a, TcActs x_acts, TcActs h_acts,
                       int64_t dim, int64_t max_inter, float* o, RowSums sums, PartSums parts,
                       unsigned up_pairs, unsigned down_pairs, unsigned slots) {
  const auto up = [&]<int Ring, int kBlocks, int Q>() {
    launch_expert_tc<true, Ring, kBlocks, Q>(ctx, a, x_acts, dim, dim, h_acts, max_inter, nullptr,
                                             RowSums{}, parts, up_pairs, slots);
  };
  const auto down = [&]<int Ring, int kBlocks, int Q>() {
    launch_expert_tc<false, Ring, kBlocks, Q>(ctx, a, h_acts, max_inter, dim, TcActs{}, 0, o, sums,
                                              parts, down_pairs, slots);
  };
  const int down_split = ctx.down_split();
  if (a.n == 1)
    up.template operator()<2, 4, kQuarters>();
  else
    up.template operator()<3, 3, kQuarters>();
  if (down_split == 2 && a.n == 1 && ctx.down_blocks() == 10)
    down.template operator()<3, 10, 2>();
  else if (down_split == 2 && a.n == 1)
    down.template operator()<4, 8, 2>();
  else if (down_split == 2)
    down.template operator()<4, 6, 2>();
  else if (a.n == 1)
    down.template operator()<4, 4, kQuarters>();
  else
    down.template operator()<4, 3, kQuarters>();
}

void run_decode_experts_tc(DeviceContext& ctx, const SlotArgs& a, const float* x, int64_t dim,
                           int64_t max_inter, float* o, float* y) {
  const unsigned slots = static_cast<unsigned>(a.n * a.parts_per_row);
  const int64_t all_slots = a.n * a.slots_per_row;
  Tensor xv = ctx.scratch(DType::BF16, Shape{a.n, dim});  // FP16 bits (2 bytes a value)
  Tensor xs = ctx.scratch(DType::F32, Shape{a.n, dim / 32});
  Tensor hv = ctx.scratch(DType::BF16, Shape{all_slots, max_inter});
  Tensor hs = ctx.scratch(DType::F32, Shape{all_slots, max_inter / 32});
  const TcActs x_acts{ptr<uint16_t>(xv), ptr<float>(xs)}, h_acts{ptr<uint16_t>(hv), ptr<float>(hs)};
  quantize_acts_tc(ctx, x, a.n, dim, x_acts);
  const auto tile_pairs = [](int64_t rows) {
    return static_cast<unsigned>((rows + kBlockRows - 1) / kBlockRows);
  };
  const unsigned up_pairs = tile_pairs(max_inter), down_pairs = tile_pairs(dim);
  // Counters: the rows' sums' [n, down pairs], then the parts' [n, pairs] behind them (each
  // kernel zeroes what it used, so the up kernel's can sit where the down kernel's are).
  const int64_t row_counters = y != nullptr ? a.n * down_pairs : 0;
  unsigned* counters = ctx.arrival_counters(row_counters + a.n * std::max(up_pairs, down_pairs));
  RowSums sums{};
  if (y != nullptr) {
    FD_CHECK(a.parts_per_row == a.k + (a.has_shared ? a.shared_parts : 0),
             "decode experts: the rows' sums need every slot of a row in the grid");
    sums = RowSums{y, counters};
  }
  PartSums parts{};  // the up and down kernels run one after the other: one set serves both
  if (a.has_shared && a.shared_parts > 1 && a.parts_per_row > a.k) {
    Tensor partial = ctx.scratch(
        DType::F32,
        Shape{a.n * a.shared_parts * 2, std::max<int64_t>(up_pairs, down_pairs) * kBlockRows});
    parts = PartSums{ptr<float>(partial), counters + row_counters};
  }
  launch_experts_tc(ctx, a, x_acts, h_acts, dim, max_inter, o, sums, parts, up_pairs, down_pairs,
                    slots);
}

}  // namespace flashdesk::cuda
