// The routed experts of a prefill-sized MoE step on Hopper's warpgroup products (wgmma.cuh), the
// tiles and values of moe_grouped.cu's mma.sync kernel. Built for sm_90a only (its own object in
// engine/CMakeLists.txt); elsewhere grouped_wgmma_runs() is false and that kernel runs.
//
// A CTA takes a tile of up to 128 pairs and 128 kCols weight rows (up: interleaved w1 / w3 rows,
// so that a thread's two adjacent accumulators are one column's gate and up value; down: output
// dims) with 2 kCols warpgroups, warpgroup g multiplying pair rows 64 (g % 2) .. + 63 against
// weight rows 128 (g / 2) .. + 127. kCols = 2 (the wide form, one CTA a multiprocessor) reads each
// pair row from L2 half as often as kCols = 1 (two CTAs a multiprocessor): 20.8 against 41.4 GB of
// L2 traffic in the up stage of an 8K-token prefill at V4.1's shapes, 8.5 against 9.5 ms (H200).
// Each 64-wide k chunk passes through shared memory three ways:
//   the FP4 codes (32 bytes a weight row), copied by cp.async kCodeStages chunks ahead;
//   the codes decoded into BF16 (E2M1 x UE8M0 is exact in BF16) in the swizzled layout the tensor
//     cores read, one chunk ahead, by every thread while the products of the chunk before (and
//     of the one before that) run;
//   the pairs' act_quant'ed rows (BF16, exact), copied by cp.async kALead chunks ahead.
// One barrier a chunk. Stage reuse: a chunk's products are awaited (wgmma_wait<1>) one chunk
// later by their own warpgroup, so the B stage of chunk i - 2, read by every warpgroup, is free
// once all have passed chunk i's barrier; so is the A stage of chunk i - 2 where two warpgroups
// read each pair row (kCols = 2), while a warpgroup that copies its own rows (kCols = 1) may
// refill the stage of chunk i - 1, whose products it has awaited itself.
#include <algorithm>
#include <atomic>

#include "engine/ops/cuda/async_copy.cuh"
#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/moe_grouped_tile.cuh"
#include "engine/ops/cuda/wgmma.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kChunk = 64;                                 // k a chunk: one swizzled 128-byte row
constexpr int kBStages = 3;                                // decoded weight stages
constexpr int kAStageBytes = kTilePairs * kWgmmaRowBytes;  // 16 KiB
template <int kCols>
struct WgShape {
  static constexpr int kThreads = 256 * kCols;  // 2 kCols warpgroups
  static constexpr int kWeights = 128 * kCols;  // weight rows (B rows) a CTA
  // A stages and how many chunks ahead they are filled: a warpgroup refilling only its own rows
  // (kCols = 1) may take the stage of chunk i - 1, else that of chunk i - 2 (the header). Deeper
  // rings for the wide form (A five stages filled three ahead, codes six) measured slower on the
  // H200: the up stage 9.29 against 8.57 ms at 8K tokens.
  static constexpr int kAStages = kCols == 1 ? 3 : 4;
  static constexpr int kALead = kCols == 1 ? kAStages - 1 : kAStages - 2;
  // Code stages, copied as many chunks ahead (a thread reads back only its own 16 bytes).
  static constexpr int kCodeStages = 3;
  static constexpr int kBStageBytes = kWeights * kWgmmaRowBytes;
  static constexpr int kCodeStageBytes = kWeights * kChunk / 2;  // 16 bytes a thread
  static constexpr int kThreadsPerARow = kThreads / kTilePairs;  // 2 or 4
  static constexpr int kAChunks = 8 / kThreadsPerARow;           // 16-byte A copies a thread
  // Copy groups still pending when a chunk's A and the next chunk's codes have landed (the
  // kernel's loop says why).
  static constexpr int kPendingGroups = kCodeStages - 2 < kALead - 1 ? kCodeStages - 2 : kALead - 1;
  static constexpr size_t kSmemBytes = kAStages * kAStageBytes + kBStages * kBStageBytes +
                                       kCodeStages * kCodeStageBytes +
                                       kWgmmaAtomBytes;  // + alignment
};

template <bool kUp, int kCols>
__global__ void __launch_bounds__(WgShape<kCols>::kThreads, kCols == 1 ? 2 : 1)
    grouped_expert_wgmma_kernel(GroupedArgs a) {
#if FD_HAVE_WGMMA
  using S = WgShape<kCols>;
  constexpr int kWeights = S::kWeights;
  FD_GRID_PROLOGUE();
  const int64_t t = a.tile0 + blockIdx.y;
  if (t >= *a.tile_count) return;
  FD_DYNAMIC_SMEM(uint8_t, raw_smem);
  // Tiles on 1 KiB boundaries of the shared window (the swizzle's atoms).
  uint8_t* const smem =
      raw_smem + ((kWgmmaAtomBytes - shared_address(raw_smem) % kWgmmaAtomBytes) % kWgmmaAtomBytes);
  uint8_t* const as = smem;                                // [kAStages][128 pairs][128 B]
  uint8_t* const bs = as + S::kAStages * kAStageBytes;     // [kBStages][kWeights][128 B]
  uint8_t* const codes = bs + kBStages * S::kBStageBytes;  // [kCodeStages][threads][16 B]
  const int32_t* tile = a.tiles + 3 * t;
  const int expert = tile[0], first = tile[1], count = tile[2];
  const ExpertEntry& e = a.table[expert];
  const int tid = static_cast<int>(threadIdx.x), group = tid / 128, lane = tid & 31;
  const int row_half = group % 2, col_half = group / 2, warp_in_group = (tid / 32) % 4;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * (kUp ? kWeights / 2 : kWeights);

  // This thread's A copies: kAChunks 16-byte chunks of pair row tid / kThreadsPerARow (with kCols
  // = 1 a row of its own warpgroup's; rows past the pairs are left stale: their products are
  // never stored).
  const int a_row = tid / S::kThreadsPerARow, a_chunk0 = (tid % S::kThreadsPerARow) * S::kAChunks;
  const uint16_t* a_src = nullptr;
  if (a_row < count) {
    const int64_t r = kUp ? a.rows[first + a_row] : first + a_row;
    a_src = a.a + r * a.k;
  }
  // Its weight codes: 32 of row tid / 2, k half tid % 2 of each chunk.
  const int b_row = tid >> 1, b_half = tid & 1;
  const int m = kUp ? (b_row & 1) : 2;  // w1 / w3 interleaved (up), w2 (down)
  const int64_t w_row = kUp ? col0 + (b_row >> 1) : col0 + b_row;
  const uint8_t* b_codes = e.data[m] + w_row * (a.k / 2) + b_half * 16;
  const uint8_t* b_scales = e.scale[m] + w_row * e.scale_cols[m] + b_half;
  const int64_t chunks = a.k / kChunk;

  auto copy_a = [&](int64_t c) {
    if (a_src == nullptr || c >= chunks) return;
    uint8_t* dst = as + (c % S::kAStages) * kAStageBytes;
    FD_UNROLL
    for (int i = 0; i < S::kAChunks; ++i)
      async_copy16(dst + swizzled_chunk(a_row, a_chunk0 + i),
                   a_src + c * kChunk + 8 * (a_chunk0 + i));
  };
  auto copy_codes = [&](int64_t c) {
    if (c < chunks)
      async_copy16(codes + (c % S::kCodeStages) * S::kCodeStageBytes + tid * 16,
                   b_codes + c * (kChunk / 2));
  };
  auto load_scale = [&](int64_t c) -> uint32_t {
    return c < chunks ? b_scales[c * (kChunk / 32)] : 0u;
  };
  // Chunk c's codes (landed) decoded with its scale into B stage c % kBStages.
  auto decode = [&](int64_t c, uint32_t scale_code) {
    const uint4 raw = *reinterpret_cast<const uint4*>(
        codes + (c % S::kCodeStages) * S::kCodeStageBytes + tid * 16);
    const uint32_t sc = f32_to_bf16_bits(e8m0_to_f32(scale_code)) * 0x10001u;
    uint8_t* dst = bs + (c % kBStages) * S::kBStageBytes;
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    FD_UNROLL
    for (int w = 0; w < 4; ++w) {
      uint32_t r[4];
      e2m1x8_to_bf16(words[w], sc, r);
      *reinterpret_cast<uint4*>(dst + swizzled_chunk(b_row, 4 * b_half + w)) =
          uint4{r[0], r[1], r[2], r[3]};
    }
  };

  float acc[64];
  FD_UNROLL
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

  // Groups of copies in order: P_j = {A j if j < kALead, codes j} for j < kCodeStages, then
  // chunk i's H_i = {A i + kALead, codes i + kCodeStages}. Chunk i's top needs A i and codes i + 1
  // (decoded during chunk i): with L = kCodeStages groups ahead of H_0, they are at most the
  // (L + i - kALead)-th and (i + 1)-th of the L + i committed, so min(L - 2, kALead - 1) of them
  // may still be pending (kPendingGroups). The code slot that H_i fills was last read by the
  // decoding of chunk i, during chunk i - 1, in this thread.
  FD_UNROLL
  for (int j = 0; j < S::kCodeStages; ++j) {
    if (j < S::kALead) copy_a(j);
    copy_codes(j);
    async_commit();
  }
  uint32_t scale_next = load_scale(1), scale_after = load_scale(2);
  async_wait<S::kCodeStages - 1>();
  decode(0, load_scale(0));
  for (int64_t i = 0; i < chunks; ++i) {
    async_wait<S::kPendingGroups>();
    fence_shared_for_async();
    __syncthreads();
    const int stage = static_cast<int>(i % kBStages);
    const int a_stage = static_cast<int>(i % S::kAStages);
    // Every warpgroup multiplies, even one whose rows are all past the pairs (a branch around
    // the products would serialise them: ptxas C7520).
    wgmma_hold(acc);
    wgmma_fence();
    const uint8_t* a_tile = as + a_stage * kAStageBytes + row_half * 64 * kWgmmaRowBytes;
    const uint8_t* b_tile = bs + stage * S::kBStageBytes + col_half * 128 * kWgmmaRowBytes;
    FD_UNROLL
    for (int s = 0; s < kChunk / 16; ++s)
      wgmma_m64n128k16_bf16(acc, wgmma_descriptor(a_tile + 32 * s),
                            wgmma_descriptor(b_tile + 32 * s));
    wgmma_commit();
    wgmma_hold(acc);
    // The next chunk's weights decoded while this chunk's products run and the last chunk's may
    // still: its B stage was last read by chunk i - 2's, which every warpgroup awaited before
    // this chunk's barrier.
    if (i + 1 < chunks) decode(i + 1, scale_next);
    wgmma_wait<1>();
    copy_a(i + S::kALead);
    copy_codes(i + S::kCodeStages);
    async_commit();
    scale_next = scale_after;
    scale_after = load_scale(i + 3);
  }
  wgmma_wait<0>();
  wgmma_hold(acc);

  // Epilogue: rows 64 row_half + 16 warp + L/4 (+ 8) of the tile, B rows 128 col_half + 8 j +
  // 2 (L % 4) (+ 1).
  FD_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int row = 64 * row_half + 16 * warp_in_group + lane / 4 + 8 * half;
    if (row >= count) continue;
    const int pair = first + row;
    FD_UNROLL
    for (int j = 0; j < 16; ++j)
      store_pair_result<kUp>(a, pair, col0, 128 * col_half + 8 * j + 2 * (lane & 3),
                             acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
  }
#else
  (void)a;
#endif
}

}  // namespace

bool grouped_wgmma_runs() {
#ifdef FLASHDESK_CUDA_EMU
  return true;
#else
  // The object holds sm_90a code alone, so the kernel has an image for the device only where the
  // device is a Hopper GPU; asking for its attributes says so without a launch. Once a device.
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};  // 0 unknown, 1 runs, 2 does not
  int device = 0;
  FD_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= 0 && device < kDevices && known[device].load() != 0) return known[device] == 1;
  cudaFuncAttributes attributes{};
  const bool runs =
      cudaFuncGetAttributes(&attributes, grouped_expert_wgmma_kernel<true, 1>) == cudaSuccess;
  if (!runs) (void)cudaGetLastError();  // the query's error is not sticky: clear it
  if (device >= 0 && device < kDevices) known[device].store(runs ? 1 : 2);
  return runs;
#endif
}

namespace {
template <int kCols>
void launch_wgmma(DeviceContext& ctx, GroupedArgs a, bool up, int64_t max_tiles) {
  using S = WgShape<kCols>;
  const auto kernel =
      up ? grouped_expert_wgmma_kernel<true, kCols> : grouped_expert_wgmma_kernel<false, kCols>;
  if (up)
    allow_dynamic_smem<grouped_expert_wgmma_kernel<true, kCols>>(S::kSmemBytes);
  else
    allow_dynamic_smem<grouped_expert_wgmma_kernel<false, kCols>>(S::kSmemBytes);
  const auto columns =
      static_cast<unsigned>(up ? a.inter / (S::kWeights / 2) : a.dim / S::kWeights);
  for (a.tile0 = 0; a.tile0 < max_tiles; a.tile0 += 65535) {
    const auto rows_y = static_cast<unsigned>(std::min<int64_t>(65535, max_tiles - a.tile0));
    FD_LAUNCH(kernel, dim3(columns, rows_y), dim3(S::kThreads), S::kSmemBytes, ctx.stream(), a);
  }
}
}  // namespace

bool grouped_wgmma_wide_fits(int64_t dim, int64_t inter) {
  return dim % WgShape<2>::kWeights == 0 && inter % (WgShape<2>::kWeights / 2) == 0;
}

void launch_grouped_wgmma(DeviceContext& ctx, const GroupedArgs& a, bool up, int64_t max_tiles,
                          bool wide) {
  if (wide)
    launch_wgmma<2>(ctx, a, up, max_tiles);
  else
    launch_wgmma<1>(ctx, a, up, max_tiles);
}

}  // namespace flashdesk::cuda
