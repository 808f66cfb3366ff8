// The routed experts of a prefill-sized MoE step on Hopper's warpgroup products (wgmma.cuh), the
// tiles and values of moe_grouped.cu's mma.sync kernel. Built for sm_90a only (its own object in
// engine/CMakeLists.txt); elsewhere grouped_wgmma_runs() is false and that kernel runs.
//
// The weights are the products' A operand, from registers, and the pairs their B operand, from
// shared memory: D[weight row][pair] = W x^T. A CTA takes a tile of up to 128 pairs and 64 kGroups
// weight rows with kGroups warpgroups (4, the wide form, or 2), warpgroup g multiplying weight rows
// 64 g .. + 63 against the tile's pairs rounded up to 32, 64, 96 or 128 (m64nNk16). Up, the weight
// rows come in blocks of 16: w1 rows of 8 columns, then w3 rows of the same columns, so that a
// thread's accumulator rows r and r
// + 8 are one column's gate and up values; down, they are output dims.
//
// Why this form (H200, an 8K-token prefill at V4.1's shapes, Nsight Compute, sixteenth session):
// the fifteenth session's kernel held both operands in shared memory, every thread decoding its
// codes into the swizzled weight tile with prmt byte tables: ~300 instructions a warp a chunk,
// most on the integer pipe, which issues at half the FP32 pipe's rate (math pipe throttle its
// largest stall; up 8.44 ms, down 4.53). Here the codes go from shared memory into the
// fragments through a lookup table (below): up 7.62 ms, down 4.07, 2.62 against 3.94 G
// instructions in the up stage, the tensor pipe busy 46%; its largest stall is now the table
// loads' latency (short scoreboard).
//
// Each 64-wide k chunk: the pairs' act_quant'ed rows (BF16, exact) are copied by cp.async two
// chunks ahead into the swizzled layout the tensor cores read; the FP4 codes (32 bytes a weight
// row) kCodeStages - 1 chunks ahead; each thread decodes its fragments (E2M1 x UE8M0 is exact in
// BF16) straight into registers, a byte of two codes a table lookup in shared memory (row r0's; row
// r0 + 8's on the integer pipe, which balances the two), while other products run. A chunk's
// products run in two halves: one half's fragments are decoded while the other half's products
// run (two whole chunks' fragments and the accumulators did not fit 128 registers).
//
// One barrier a chunk. Stage reuse: a warpgroup awaits its products of chunk i - 1 during chunk i
// (wgmma_wait<1> after the first half's), so every warpgroup has awaited chunk i - 2's once all
// have passed chunk i's barrier: the pair stage of chunk i - 2 is free then. A code stage is read
// (by the decoding) in the chunk before its own and in its own, so the stage of chunk i - 1 is
// free at chunk i's barrier (the stage of chunk i, refilled at the end of chunk i before, could
// still be read by a thread behind the others).
#include <algorithm>
#include <atomic>

#include "engine/ops/cuda/async_copy.cuh"
#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/moe_grouped_tile.cuh"
#include "engine/ops/cuda/wgmma.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kChunk = 64;                  // k a chunk: one swizzled 128-byte row
constexpr int kPairStages = 4;              // pair stages, filled two chunks ahead
constexpr int kPairLead = kPairStages - 2;  // (the header's stage reuse)
// Code stages, filled kCodeStages - 1 chunks ahead: the codes are most of a chunk's bytes, and a
// tile of few pairs (a short prompt, a 32-row decode step) is bound by how many of them are in
// flight, not by its products.
constexpr int kCodeStages = 6;
// The groups a chunk's top may leave pending (below): its pairs were committed kPairLead chunks
// back, its next codes kCodeStages - 2 back.
constexpr int kPendingAtTop = kPairLead - 1 < kCodeStages - 3 ? kPairLead - 1 : kCodeStages - 3;
constexpr int kPairStageBytes = kTilePairs * kWgmmaRowBytes;  // 16 KiB
constexpr int kCodeRowBytes = kChunk / 2;                     // two 16-byte pieces

// The shared window's layout, by shared address: the code stages from the start of the dynamic
// part (about 1 KiB in) up to kTableAddress; the decoding tables from there; the pair stages
// from kPairsAddress. The tables sit on a 64 KiB boundary so that a table address is a prmt of
// the code byte into a lane's base address (below).
constexpr uint32_t kTableAddress = 64u << 10;
constexpr uint32_t kPairsAddress = 128u << 10;
constexpr size_t kSmemBytes = kPairsAddress + kPairStages * kPairStageBytes;  // 192 KiB

template <int kGroups>
struct RsShape {
  static constexpr int kThreads = 128 * kGroups;
  static constexpr int kWeights = 64 * kGroups;  // weight rows (A rows) a CTA
  static constexpr int kCodeStageBytes = kWeights * kCodeRowBytes;
  static constexpr int kThreadsPerPairRow = kThreads / kTilePairs;  // 4 or 2
  static constexpr int kPairCopies = 8 / kThreadsPerPairRow;        // 16-byte copies a thread
  static_assert(kCodeStages * kCodeStageBytes + 2 * kWgmmaAtomBytes <= kTableAddress);
};

// Where a code stage keeps weight row r's 16-byte piece p: the pieces of rows r and r + 4 trade
// places, so that the eight rows a warp reads at once fall on distinct banks.
__device__ __forceinline__ int code_offset(int r, int p) {
  return r * kCodeRowBytes + ((p ^ ((r >> 2) & 1)) << 4);
}

// The 32-bit word at a shared address.
__device__ __forceinline__ uint32_t load_shared_u32(uint32_t address) {
#ifdef FLASHDESK_CUDA_EMU
  uint32_t v;
  std::memcpy(&v, fd_emu::dynamic_smem() + address, 4);
  return v;
#else
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(address));
  return v;
#endif
}

// The CTA's weight row r: its matrix (w1 0, w3 1, w2 2) and row there.
template <bool kUp>
__device__ __forceinline__ void weight_row(int r, int64_t col0, int& m, int64_t& row) {
  if constexpr (kUp) {
    m = (r % 16) / 8;
    row = col0 + 8 * (r / 16) + r % 8;
  } else {
    m = 2;
    row = col0 + r;
  }
}

template <bool kUp, int kGroups>
__global__ void __launch_bounds__(RsShape<kGroups>::kThreads, 1)
    grouped_expert_wgmma_kernel(GroupedArgs a) {
#if FD_HAVE_WGMMA
  using S = RsShape<kGroups>;
  FD_GRID_PROLOGUE();
  const int64_t t = a.tile0 + blockIdx.y;
  if (t >= *a.tile_count) return;
  FD_DYNAMIC_SMEM(uint8_t, raw_smem);
  const uint32_t raw_address = shared_address(raw_smem);
  // [stages][rows][32 B], on a 1 KiB boundary
  uint8_t* const codes_smem =
      raw_smem + ((kWgmmaAtomBytes - raw_address % kWgmmaAtomBytes) % kWgmmaAtomBytes);
  uint8_t* const tables = raw_smem + (kTableAddress - raw_address);
  uint8_t* const pairs_smem = raw_smem + (kPairsAddress - raw_address);  // [stages][128][128 B]
  const int32_t* tile = a.tiles + 3 * t;
  const int expert = tile[0], first = tile[1], count = tile[2];
  const ExpertEntry& e = a.table[expert];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  const uint32_t q = static_cast<uint32_t>(lane & 3);
  // This CTA's first column (up: of inter) or output dim (down).
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * (kUp ? S::kWeights / 2 : S::kWeights);
  const int chunks = static_cast<int>(a.k / kChunk);

  // The decoding tables, 256 B for each byte value v at kTableAddress + 256 v: word l the BF16
  // pair of v's two codes, word 32 + l the UE8M0 scale v as a BF16 pair, one copy for each lane
  // l, so that a warp's lookups fall on distinct banks. A lookup is a prmt of the byte into this
  // lane's base address and one shared load: the prmt decoding (about 2.5 integer instructions a
  // code) waited on the integer pipe, at half the FP32 pipe's rate (ncu: math pipe throttle the
  // largest stall; 8.6 ms the up stage at 8K tokens).
  // Filled by each CTA (~400 instructions a thread against ~160 a chunk): thread t writes word
  // t % 64 of the byte values t / 64 + 8 k, k < 32 (a warp fills one of the two tables).
  static_assert(S::kThreads % 64 == 0);
  {
    const int word = tid % 64;
    uint8_t* const dst = tables + 4 * word;
    for (int v = tid / 64; v < 256; v += S::kThreads / 64) {
      const auto u = static_cast<uint32_t>(v);
      // The scale as a BF16 pair; a byte's two codes times one (exact), as the other kernels
      // decode them.
      const uint32_t scale = f32_to_bf16_bits(e8m0_to_f32(u)) * 0x10001u;
      uint32_t pairs[4];
      e2m1x8_to_bf16(u, 0x3F803F80u, pairs);
      *reinterpret_cast<uint32_t*>(dst + 256 * v) = word < 32 ? pairs[0] : scale;
    }
  }
  const uint32_t code_base = kTableAddress + 4u * static_cast<uint32_t>(lane);
  const uint32_t scale_base = code_base + 128u;

  // This thread's pair copies: pieces tid % kThreadsPerPairRow + kThreadsPerPairRow i of pair row
  // tid / kThreadsPerPairRow (consecutive threads, consecutive 16 bytes of a row; rows past the
  // pairs are left stale: their products are never stored).
  const int pair_row = tid / S::kThreadsPerPairRow, piece0 = tid % S::kThreadsPerPairRow;
  const uint16_t* pair_src = nullptr;
  if (pair_row < count) {
    const int64_t r = kUp ? a.rows[first + pair_row] : first + pair_row;
    pair_src = a.a + r * a.k;
  }
  // Its code copy: piece tid % 2 of weight row tid / 2.
  const int copy_row = tid >> 1, copy_piece = tid & 1;
  const uint8_t* code_src;
  {
    int m;
    int64_t row;
    weight_row<kUp>(copy_row, col0, m, row);
    code_src = e.data[m] + row * (a.k / 2) + copy_piece * 16;
  }
  // Its fragment rows: r0 and r0 + 8 (up: one column's w1 and w3 rows), their scales.
  const int r0 = 16 * (tid / 32) + lane / 4;
  const uint8_t* scale_src[2];
  for (int h = 0; h < 2; ++h) {
    int m;
    int64_t row;
    weight_row<kUp>(r0 + 8 * h, col0, m, row);
    scale_src[h] = e.scale[m] + row * e.scale_cols[m];
  }

  auto copy_pairs = [&](int c) {
    if (pair_src == nullptr || c >= chunks) return;
    uint8_t* dst = pairs_smem + (c % kPairStages) * kPairStageBytes;
    FD_UNROLL
    for (int i = 0; i < S::kPairCopies; ++i) {
      const int p = piece0 + S::kThreadsPerPairRow * i;
      async_copy16(dst + swizzled_chunk(pair_row, p), pair_src + c * kChunk + 8 * p);
    }
  };
  auto copy_codes = [&](int c, int stage) {
    if (c < chunks)
      async_copy16(codes_smem + stage * S::kCodeStageBytes + code_offset(copy_row, copy_piece),
                   code_src + c * kCodeRowBytes);
  };
  // Chunk c's scale codes: byte 2h + p of row r0 + 8h, k 32p .. 32p + 31.
  auto load_scales = [&](int c) -> uint32_t {
    if (c >= chunks) return 0u;
    const uint8_t* s0 = scale_src[0] + 2 * c;
    const uint8_t* s1 = scale_src[1] + 2 * c;
    return s0[0] | (uint32_t{s0[1]} << 8) | (uint32_t{s1[0]} << 16) | (uint32_t{s1[1]} << 24);
  };
  // Half p of a chunk (k 32p .. 32p + 31: k16 steps 2p and 2p + 1) from code stage `stage`
  // (landed, past a barrier): rows r0 and r0 + 8's words 4p .. 4p + 3, loaded before the wait
  // that precedes their decoding so that the wait covers the loads' latency.
  auto load_half = [&](int stage, int p, uint4(&words)[2]) {
    const uint8_t* codes = codes_smem + stage * S::kCodeStageBytes;
    FD_UNROLL
    for (int h = 0; h < 2; ++h)
      words[h] = *reinterpret_cast<const uint4*>(codes + code_offset(r0 + 8 * h, p));
  };
  // Those words decoded into this thread's fragments f[step - 2p]: byte q of word 4p + j is the k
  // pair (2q, 2q + 1) of step 2p + j / 2, register h (j even) or 2 + h (odd).
  auto decode_half = [&](const uint4(&words)[2], int p, uint32_t scales, uint32_t(&f)[2][4]) {
    FD_UNROLL
    for (int h = 0; h < 2; ++h) {
      const uint32_t sc =
          load_shared_u32(__byte_perm(scales, scale_base, 0x7604u | ((2 * h + p) << 4)));
      const uint32_t w[4] = {words[h].x, words[h].y, words[h].z, words[h].w};
      uint32_t r[4];
      if (h == 1) {
        // Byte q of the four words gathered into one word and decoded on the integer pipe
        // (bf16_codes.cuh); row r0's by the tables. Only tables: the loads' latency the largest
        // stall (short scoreboard 3.5 warps an issue); only the integer pipe: its throttle (1.5)
        // and 8.13 ms the up stage at 8K tokens; half and half 7.42 against 7.69 (H200, Nsight
        // Compute; the down stage 4.02 against 4.09).
        const uint32_t sel = q | ((4u + q) << 4);  // byte q of x, then byte q of y
        e2m1x8_to_bf16(
            __byte_perm(__byte_perm(w[0], w[1], sel), __byte_perm(w[2], w[3], sel), 0x5410u), sc,
            r);
      } else {
        FD_UNROLL
        for (int j = 0; j < 4; ++j)
          r[j] =
              scale_bf16x2(load_shared_u32(__byte_perm(w[j], code_base, 0x7604u | (q << 4))), sc);
      }
      f[0][h] = r[0];
      f[0][2 + h] = r[1];
      f[1][h] = r[2];
      f[1][2 + h] = r[3];
    }
  };

  // The chunks' products and the epilogue with kN pairs a product (the tile's pairs rounded up to
  // a product width): the products' time follows kN, and a third of the tiles' rows were empty
  // at 128 (an expert's last tile holds what is left of its pairs).
  const auto run = [&]<int kN>() {
    float acc[kN / 2];
    FD_UNROLL
    for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
    // The products of half p of a pair stage (descriptor `pairs`) with the fragments f.
    auto multiply_half = [&](uint64_t pairs, int p, const uint32_t(&f)[2][4]) {
      wgmma_fence();
      FD_UNROLL
      for (int s = 0; s < 2; ++s)
        wgmma_m64nNk16_bf16_rs<kN>(acc, f[s], pairs + ((64 * p + 32 * s) >> 4));
      wgmma_commit();
    };
    // Two half chunks' fragments: while one half's products run, the next half is decoded into the
    // other (halves rather than whole chunks: two chunks' fragments and the accumulators did not
    // fit 128 registers).
    uint32_t first_half[2][4], second_half[2][4];

    // Copy groups in order: P_j = {pairs j if j < kPairLead, codes j} for j < kCodeStages - 1,
    // then H_i, issued right after chunk i's barrier: {codes i + kCodeStages - 1 into the stage
    // chunk i - 1 read (every thread has passed its reads), pairs i + kPairLead}. Codes c are group
    // c; pairs p >= kPairLead group kCodeStages - 1 + p - kPairLead. Chunk i's top needs pairs i
    // and codes i + 1 (decoded during chunk i) of the kCodeStages - 1 + i committed: kPendingAtTop
    // may be pending. Chunk i's code stage is i % kCodeStages (`stage`, and `next` for chunk i +
    // 1).
    FD_UNROLL
    for (int j = 0; j < kCodeStages - 1; ++j) {
      if (j < kPairLead) copy_pairs(j);
      copy_codes(j, j);
      async_commit();
    }
    uint32_t scales = load_scales(0), scales_next = load_scales(1);
    async_wait<kCodeStages - 2>();
    __syncthreads();  // the tables and every thread's codes of chunk 0
    uint4 words[2];
    load_half(0, 0, words);
    decode_half(words, 0, scales, first_half);
    const uint64_t pairs0 = wgmma_descriptor(pairs_smem);
    int stage = 0, next = 1;
    for (int i = 0; i < chunks; ++i) {
      async_wait<kPendingAtTop>();
      fence_shared_for_async();
      __syncthreads();
      copy_codes(i + kCodeStages - 1, stage == 0 ? kCodeStages - 1 : stage - 1);
      copy_pairs(i + kPairLead);
      async_commit();
      const uint64_t pairs = pairs0 + (((i % kPairStages) * kPairStageBytes) >> 4);
      multiply_half(pairs, 0, first_half);
      load_half(stage, 1, words);
      wgmma_wait<1>();  // the last chunk's second half, which read second_half
      decode_half(words, 1, scales, second_half);
      multiply_half(pairs, 1, second_half);
      if (i + 1 < chunks) load_half(next, 0, words);
      wgmma_wait<1>();  // this chunk's first half
      if (i + 1 < chunks) decode_half(words, 0, scales_next, first_half);
      scales = scales_next;
      scales_next = load_scales(i + 2);
      stage = next;
      next = next + 1 == kCodeStages ? 0 : next + 1;
    }
    wgmma_wait<0>();
    wgmma_hold(acc);

    // Epilogue: accumulator 4j + 2h + e is weight row r0 + 8h, pair 8j + 2q + e of the tile.
    FD_UNROLL
    for (int j = 0; j < kN / 8; ++j) FD_UNROLL
    for (int e2 = 0; e2 < 2; ++e2) {
      const int p = 8 * j + 2 * static_cast<int>(q) + e2;
      if (p >= count) continue;
      const int pair = first + p;
      const float v0 = acc[4 * j + e2], v1 = acc[4 * j + 2 + e2];
      if constexpr (kUp) {
        const int64_t column = col0 + 8 * (r0 / 16) + r0 % 8;
        a.out[static_cast<int64_t>(pair) * a.inter + column] =
            swiglu(round_bf16(v0), round_bf16(v1), a.weights[pair], a.limit);
      } else {
        float* o = a.out + static_cast<int64_t>(a.slots[pair]) * a.dim + col0 + r0;
        o[0] = round_bf16(v0);
        o[8] = round_bf16(v1);
      }
    }
  };
  const int width = a.fitted_products ? count : kTilePairs;
  if (width <= 32)
    run.template operator()<32>();
  else if (width <= 64)
    run.template operator()<64>();
  else if (width <= 96)
    run.template operator()<96>();
  else
    run.template operator()<128>();
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
      cudaFuncGetAttributes(&attributes, grouped_expert_wgmma_kernel<true, 2>) == cudaSuccess;
  if (!runs) (void)cudaGetLastError();  // the query's error is not sticky: clear it
  if (device >= 0 && device < kDevices) known[device].store(runs ? 1 : 2);
  return runs;
#endif
}

namespace {
template <int kGroups>
void launch_wgmma(DeviceContext& ctx, const GroupedArgs& a, bool up, int64_t max_tiles) {
  using S = RsShape<kGroups>;
  if (up)
    launch_tiles<grouped_expert_wgmma_kernel<true, kGroups>>(
        ctx, "grouped_expert_wgmma_kernel<up>", a,
        static_cast<unsigned>(a.inter / (S::kWeights / 2)), max_tiles, S::kThreads, kSmemBytes);
  else
    launch_tiles<grouped_expert_wgmma_kernel<false, kGroups>>(
        ctx, "grouped_expert_wgmma_kernel<down>", a, static_cast<unsigned>(a.dim / S::kWeights),
        max_tiles, S::kThreads, kSmemBytes);
}
}  // namespace

bool grouped_wgmma_wide_fits(int64_t dim, int64_t inter) {
  return dim % RsShape<4>::kWeights == 0 && inter % (RsShape<4>::kWeights / 2) == 0;
}

void launch_grouped_wgmma(DeviceContext& ctx, const GroupedArgs& a, bool up, int64_t max_tiles,
                          bool wide) {
  if (wide)
    launch_wgmma<4>(ctx, a, up, max_tiles);
  else
    launch_wgmma<2>(ctx, a, up, max_tiles);
}

}  // namespace flashdesk::cuda
