// The decode experts' up kernel over the places (moe_decode_up_places.cuh). Its blocks are those
// of the kernel over tiles (expert_tc_kernel<up>, moe_decode_tc.cu: eight warps, two tiles of 16
// rows, four warps splitting a tile's K units, the same per-warp rings and products), but a block
// runs its share of the step's units piece by piece: each piece is the units of one segment (a
// slot's tile pair) that fall in the block's share, its sums reduced as the tile kernel's are;
// a piece that is a whole segment finishes it (SwiGLU into h), else the last of the segment's
// pieces to arrive adds their sums in piece order and finishes it.
#include <algorithm>

#include "engine/ops/cuda/moe_decode_tc_units.cuh"
#include "engine/ops/cuda/moe_decode_up_places.cuh"

namespace flashdesk::cuda {
namespace {

using namespace decode_tc;

// A segment: row t's slot column j (k: the shared slot), tile pair `pair`, its `units` K units,
// the first of them unit `start` of the step's sequence; `index` its place among the segments.
// 32-bit (a step has at most 8 rows of 33 slots of 128 pairs of 64 units): the piece loop's state
// lives across the ring's loop, and 64-bit fields spilled there.
struct Segment {
  int32_t index, t, j, pair, units, start;
};

__device__ __forceinline__ Segment segment_at(const SlotArgs& a, const UpPlaces& p, int32_t w) {
  const int32_t row_units = static_cast<int32_t>(p.row_units),
                pairs = static_cast<int32_t>(p.pairs);
  const int32_t ur = static_cast<int32_t>(p.units.routed),
                us = static_cast<int32_t>(p.units.shared);
  const int32_t t = w / row_units, r = w % row_units,
                routed = pairs * static_cast<int32_t>(a.k) * ur;
  Segment s;
  s.t = t;
  if (r < routed) {
    const int32_t c = r / ur;  // (slot column, pair) in slot order
    s.j = c / pairs;
    s.pair = c % pairs;
    s.units = ur;
    s.start = t * row_units + c * ur;
  } else {
    const int32_t c = (r - routed) / us;
    s.j = static_cast<int32_t>(a.k);
    s.pair = c;
    s.units = us;
    s.start = t * row_units + routed + c * us;
  }
  s.index = (t * static_cast<int32_t>(p.cols) + s.j) * pairs + s.pair;
  return s;
}

// The block whose share holds unit w (block b's share begins at unit b total / blocks).
__device__ __forceinline__ int32_t block_of(const UpPlaces& p, int32_t w) {
  return static_cast<int32_t>(((w + 1) * p.blocks - 1) / p.total);
}

// Warp 0, a piece's units [at, end) done and its quarters' sums in `quarter_sums`: the pair's 32
// rows (lane L row 32 pair + L) summed over the quarters; a whole segment is finished here, a
// piece's sums go out and the segment's last piece adds all of them in piece order and finishes
// it. The piece's segment, slot and expert are found again rather than held across the ring's
// loop (registers: the kernel spilled with them held).
template <int Q>
__device__ void finish_piece(const SlotArgs& a, const UpPlaces& p, int32_t at, int32_t end,
                             const float (&quarter_sums)[kTilesPerBlock][Q][2][kTileRows], TcActs h,
                             int64_t h_stride) {
  constexpr int M = 2;
  const unsigned lane = threadIdx.x & 31u;
  const Segment sg = segment_at(a, p, at);
  const int32_t slot = sg.t * static_cast<int32_t>(a.slots_per_row) + sg.j;
  float weight;
  const int32_t e = static_cast<int32_t>(slot_expert(a, slot, &weight));
  float sum[M];
  FD_UNROLL
  for (int m = 0; m < M; ++m) {
    sum[m] = 0.0f;
    for (int s = 0; s < Q; ++s) sum[m] += quarter_sums[lane / kTileRows][s][m][lane % 16];
  }
  if (at != sg.start || end != sg.start + sg.units) {
    const int32_t first = block_of(p, sg.start);
    const int32_t count = block_of(p, sg.start + sg.units - 1) - first + 1;
    const auto partial = [&](int32_t piece, int m) {
      return p.partial +
             ((sg.index * static_cast<int32_t>(p.max_pieces) + piece) * M + m) * kBlockRows + lane;
    };
    FD_UNROLL
    for (int m = 0; m < M; ++m)
      __stcg(partial(static_cast<int32_t>(blockIdx.x) - first, m), sum[m]);
    if (!warp_arrives_last(p.done + sg.index, static_cast<unsigned>(count))) return;
    FD_UNROLL
    for (int m = 0; m < M; ++m) {
      sum[m] = 0.0f;
      for (int32_t piece = 0; piece < count; ++piece) sum[m] += __ldcg(partial(piece, m));
    }
  }
  swiglu_block(a, e, weight, a.table[e].inter, sg.pair, slot, sum, h, h_stride);
}

template <int Ring, int kBlocks>
__global__ void __launch_bounds__(kTilesPerBlock* kQuarters * 32, kBlocks)
    expert_up_places_kernel(SlotArgs a, UpPlaces p, TcActs in, int64_t in_stride, TcActs h,
                            int64_t h_stride, int early, int interleave) {
  constexpr int M = 2, Q = kQuarters, kThreads = kTilesPerBlock * Q * 32;
  // Wait, then let the next grid launch (the down kernel reads the ids before its wait). Early:
  // once the first piece's first units are in flight (the tile kernel's `early`).
  bool waited = false;
  const auto wait_then_allow = [&] {
    if (waited) return;
    fd_wait_prior_grid();
    fd_allow_dependents();
    waited = true;
  };
  if (!early) wait_then_allow();
  // Two buffers, by piece parity: warp 0 may still read a piece's sums while the others write
  // the next piece's (the barrier of the piece after that orders the third).
  __shared__ float quarter_sums[2][kTilesPerBlock][Q][M][kTileRows];
  FD_DYNAMIC_SMEM(uint8_t, rings);
  uint16_t* act = reinterpret_cast<uint16_t*>(rings + ring_bytes<M>(Ring, kTilesPerBlock * Q));
  float* act_scale = reinterpret_cast<float*>(act + in_stride);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const int tl = static_cast<int>(warp) / Q, quarter = static_cast<int>(warp) % Q;
  uint8_t* ring = rings + warp * (Ring * unit_bytes<M>());
  const int32_t w1 = static_cast<int32_t>((blockIdx.x + int64_t{1}) * p.total / p.blocks);
  int32_t loaded = -1;  // the activation row in shared memory
  int pieces = 0;
  for (int32_t w = static_cast<int32_t>(blockIdx.x * p.total / p.blocks); w < w1;) {
    const int32_t piece_at = w;
    const Segment sg = segment_at(a, p, w);  // the same for the whole block
    const int32_t u0 = w - sg.start, u1 = std::min(w1, sg.start + sg.units) - sg.start;
    w = sg.start + u1;
    const int32_t slot = sg.t * static_cast<int32_t>(a.slots_per_row) + sg.j;
    float weight;
    const int32_t e = static_cast<int32_t>(slot_expert(a, slot, &weight));
    const ExpertEntry& ex = a.table[e];
    const int32_t rows = static_cast<int32_t>(ex.inter), k = static_cast<int32_t>(ex.dim);
    const int32_t tiles = (rows + kTileRows - 1) / kTileRows;
    // Another device's expert, or a pair past this expert's rows: no piece of the segment runs.
    if (ex.data[0] == nullptr || sg.pair * kTilesPerBlock >= tiles) continue;
    const int32_t tile = sg.pair * kTilesPerBlock + tl;
    UnitSeq us = warp_units(u0, u1, quarter, Q, interleave != 0);
    if (tile >= tiles) us.count = 0;
    const int32_t t = sg.t;
    const auto act_ready = [&] {
      wait_then_allow();
      if (loaded == t) return;           // the same for the whole block
      if (loaded >= 0) __syncthreads();  // every warp done with the previous row
      const uint16_t* act_row = in.values + t * in_stride;
      for (int32_t c = threadIdx.x * 8; c < k; c += kThreads * 8)
        async_copy16(act + c, act_row + c);
      for (int32_t b = threadIdx.x; b < k / 32; b += kThreads)
        act_scale[b] = in.scales[t * (in_stride / 32) + b];
      async_commit();
      async_wait<0>();
      __syncthreads();
      loaded = t;
    };
    float acc[M][2] = {};
    LaneRows<M> lr;
    FD_UNROLL
    for (int m = 0; m < M; ++m) {
      FD_UNROLL
      for (int hh = 0; hh < 2; ++hh) {
        const uint8_t* unused;
        lane_row(ex, m, tile * kTileRows + copy_row() + 8 * hh, rows, k, &lr.row[m][hh], &unused);
        lane_row(ex, m, tile * kTileRows + lane / 4 + 8 * hh, rows, k, &unused, &lr.scale[m][hh]);
      }
    }
    bool streamed = false;
    with_format(ex.format[0], [&]<WeightFormat F>() {
      if constexpr (kTcFormat<F>) {
        tile_sums<F, M, Ring>(lr, us, act, act_scale, ring, acc, act_ready);
        streamed = true;
      }
    });
    if (!streamed) act_ready();
    const int buf = pieces++ & 1;
    if ((lane & 3u) == 0) {
      FD_UNROLL
      for (int m = 0; m < M; ++m) {
        FD_UNROLL
        for (int hh = 0; hh < 2; ++hh)
          quarter_sums[buf][tl][quarter][m][lane / 4 + 8 * hh] = acc[m][hh];
      }
    }
    __syncthreads();
    if (warp == 0) finish_piece(a, p, piece_at, w, quarter_sums[buf], h, h_stride);
  }
  wait_then_allow();  // a block with no piece to run
}

// Shared memory of a block: the rings, then the activation row (act_bytes).
template <int Ring>
int places_smem(int64_t in_stride) {
  return ring_bytes<2>(Ring, kTilesPerBlock * kQuarters) + act_bytes(in_stride);
}

// The variant by rows, as the kernel over tiles picks it: one row four blocks a multiprocessor
// with rings 2 deep, more rows three with rings 3 deep.
template <class Fn>
void with_variant(int64_t rows, Fn&& fn) {
  if (rows == 1)
    fn.template operator()<2, 4>();
  else
    fn.template operator()<3, 3>();
}

// The K units of the gate and up rows of an expert (w1's; w3 has its format).
int64_t entry_units(const ExpertEntry& e) {
  return static_cast<WeightFormat>(e.format[0]) == WeightFormat::Fp4Row ? e.dim / 128 : e.dim / 64;
}

}  // namespace

UpUnits up_units_of(std::span<const ExpertEntry> table, int64_t n_routed) {
  UpUnits u;
  for (int64_t e = 0; e < n_routed; ++e) {
    const ExpertEntry& x = table[static_cast<size_t>(e)];
    if (x.data[0] == nullptr) continue;
    if (x.format[0] != x.format[1]) return {};
    const int64_t units = entry_units(x);
    if (u.routed != 0 && u.routed != units) return {};
    u.routed = units;
  }
  if (static_cast<int64_t>(table.size()) > n_routed) {
    const ExpertEntry& s = table[static_cast<size_t>(n_routed)];
    if (s.data[0] != nullptr) {
      if (s.format[0] != s.format[1]) return {};
      u.shared = entry_units(s);
    }
  }
  return u;
}

UpPlaces plan_up_places(const DeviceContext& ctx, const SlotArgs& a, UpUnits units, int64_t pairs,
                        int64_t in_stride) {
  UpPlaces p{};
  const bool shared_in_grid = a.parts_per_row > a.k;
  p.cols = a.k + (shared_in_grid ? 1 : 0);
  p.pairs = pairs;
  // A column whose experts are all absent: its segments still take their place in the sequence
  // (one unit each: they run nothing).
  p.units = UpUnits{std::max<int64_t>(units.routed, 1), std::max<int64_t>(units.shared, 1)};
  p.row_units = pairs * (a.k * p.units.routed + (shared_in_grid ? p.units.shared : 0));
  p.total = a.n * p.row_units;
  FD_CHECK(p.total < (int64_t{1} << 30),
           "decode experts: too many K units for the up kernel over the places");
  int resident = 0;
  with_variant(a.n, [&]<int Ring, int kBlocks>() {
    const size_t per_sm = ctx.props().sharedMemPerMultiprocessor;
    const int by_smem = static_cast<int>(per_sm / (places_smem<Ring>(in_stride) + 1024));
    resident = std::max(1, std::min(kBlocks, by_smem));
  });
  p.blocks = std::max<int64_t>(
      1, std::min<int64_t>(p.total, static_cast<int64_t>(resident) * ctx.multiprocessors()));
  // A segment of U units meets at most ceil(U blocks / total) + 1 blocks' shares.
  const int64_t longest = std::max(p.units.routed, shared_in_grid ? p.units.shared : 0);
  p.max_pieces = (longest * p.blocks + p.total - 1) / p.total + 1;
  return p;
}

void launch_up_places(DeviceContext& ctx, const SlotArgs& a, const UpPlaces& p, TcActs x,
                      int64_t in_stride, TcActs h, int64_t h_stride) {
  const int early = gemv_weights_before_wait() ? 1 : 0;
  const int interleave = ctx.interleaved_units() ? 1 : 0;
  with_variant(a.n, [&]<int Ring, int kBlocks>() {
    const int smem = places_smem<Ring>(in_stride);
    allow_dynamic_smem<expert_up_places_kernel<Ring, kBlocks>>(static_cast<size_t>(smem));
    FD_LAUNCH((expert_up_places_kernel<Ring, kBlocks>), dim3(static_cast<unsigned>(p.blocks)),
              dim3(kTilesPerBlock * kQuarters * 32), static_cast<size_t>(smem), ctx.stream(), a, p,
              x, in_stride, h, h_stride, early, interleave);
  });
}

}  // namespace flashdesk::cuda
