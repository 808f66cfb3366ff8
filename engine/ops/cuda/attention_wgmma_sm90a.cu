// Sparse attention of prefill-sized calls on Hopper's warpgroup products (wgmma.cuh), the
// definition attention_tc.cu computes with mma.sync (docs/numerics.md "Sparse attention"). Built
// for sm_90a only (its own object in engine/CMakeLists.txt); elsewhere attention_tc.cu runs.
//
// One CTA a query, as there: the query's 64 heads share its keys (one KV head), so the heads are
// the products' M = 64 rows, and each 64-slot block of the key list is decoded once into a BF16
// tile. Why this form (H200, an 8K-token prefill at V4.1's shapes, Nsight Compute, twentieth
// session): the mma.sync kernel ran the keys' decoding, the two products and the softmax one after
// another on every warp, at about 15% of the tensor rate, its fragment loads' latency the largest
// stall. Here the roles are split and overlap:
//   - a producer warpgroup copies each block's cache rows (cp.async, a ring of ten rows per warp,
//     so that the copies run ahead across block boundaries) and decodes them into one of two key
//     tiles, in the swizzled layout the tensor cores read (wgmma.cuh);
//   - two consumer warpgroups multiply. S = Q K^T: warpgroup c takes slots 32 c .. 32 c + 31, Q
//     from registers (ldmatrix from a BF16 copy in shared memory), the keys K-major; after the
//     block step (both warpgroups' maxima exchanged), P (BF16) goes through shared memory and
//     O += P V takes the same key tile as a transposed B, warpgroup c the head dims D/2 c .. .
// Each product sums only its own 16 products (fresh accumulators, scale-d 0), and those sums are
// added in FP32 on the CUDA cores, rounded to nearest, as attention_tc.cu does: the tensor cores
// truncate as they accumulate, and a running sum kept in them drifted a golden row by 2.6e-2.
// Several products are in flight a warpgroup (three of S's, two of P V's, each with its own
// fresh accumulators): one's sums are added while the next ones run.
//
// Measured (twenty-first session, docs/cuda-backend.md): 1.98 against the mma.sync kernel's 2.08
// ms in a window-only layer (two blocks a query), 6.24 against 6.10 in a Full r1 layer (ten):
// the consumers bound it, their two warpgroups in lockstep through the block step. So the
// backend takes it for short key lists (CudaBackend::AttentionWarpgroups).
//
// Barriers: the producer signals a tile full (named barrier 1 + tile, its 128 threads arriving,
// the 256 consumers waiting) and the consumers signal it free once their products of it are done
// (3 + tile); the consumers' own exchanges use barrier 5 (256 threads), the producer's own 6.
// Registers: the producer gives most of its own to the consumers, which hold the output's
// accumulators (D/2 values of 64 heads a warpgroup: 128 a thread at D = 512).
#include "engine/ops/cuda/async_copy.cuh"
#include "engine/ops/cuda/attention_args.cuh"
#include "engine/ops/cuda/bf16_codes.cuh"
#include "engine/ops/cuda/mma.cuh"
#include "engine/ops/cuda/moe_grouped.h"
#include "engine/ops/cuda/warp_roles.cuh"
#include "engine/ops/cuda/wgmma.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kHeads = 64;  // the products' M
constexpr int kConsumerThreads = 256;
constexpr int kThreads = kConsumerThreads + 128;
constexpr int kProducerWarps = 4;
constexpr int kRingRows = 10;  // rows a producer warp has in flight
constexpr int kTables = 3;     // row tables (the producer's lookups), a block each
constexpr int kRowsPerWarp = kBlockSlots / kProducerWarps;
constexpr int kPanelBytes = kBlockSlots * kWgmmaRowBytes;  // 64 head dims of every slot: 8 KiB
constexpr int kPStride = kBlockSlots + 8;                  // BF16 values a P row (ldmatrix pad)
constexpr int kConsumerRegisters = 232, kProducerRegisters = 40;
constexpr int kSDepth = 3;  // S's sums in flight a warpgroup
// Products a fresh sum covers (the FP32 additions on the CUDA cores take the rest): 1, the
// products of 16 terms the definition's numerics were checked with (the header).
constexpr int kSumSteps = 1;
static_assert(2 * 128 * kConsumerRegisters + 128 * kProducerRegisters <= 65536);
// Named barriers.
constexpr unsigned kFullBarrier = 1, kFreeBarrier = 3, kConsumerBarrier = 5, kProducerBarrier = 6;

template <int D>
struct Layout {
  static constexpr int kTileBytes = kBlockSlots * D * 2;
  static constexpr int kQStride = D + 8;  // BF16 values a Q row (ldmatrix pad)
  static constexpr size_t kTiles = 0;
  static constexpr size_t kQ = kTiles + 2 * kTileBytes;
  static constexpr size_t kP = kQ + size_t{kHeads} * kQStride * 2;
  static constexpr size_t kRing = kP + size_t{kHeads} * kPStride * 2;
  static constexpr size_t kTable = kRing + size_t{kProducerWarps} * kRingRows * raw_stride(D);
  static constexpr size_t kMaxima = kTable + size_t{kTables} * kBlockSlots * 8;
  static constexpr size_t kSums = kMaxima + 2 * kHeads * 4;
  static constexpr size_t kValid = kSums + 2 * kHeads * 4;         // [tile][slot] 0|1
  static constexpr size_t kHas = kValid + 2 * kBlockSlots;         // [tile][producer warp] any key
  static constexpr size_t kFlags = kHas + 2 * kProducerWarps * 4;  // [warp][ring row] valid|fp4
  static constexpr size_t kBytes = kFlags + kProducerWarps * kRingRows;
  static constexpr size_t kLaunchBytes = kBytes + kWgmmaAtomBytes;  // the tiles' 1 KiB alignment
  static_assert(kLaunchBytes <= 227 * 1024, "a Hopper CTA's shared memory");
};

// The producer warp `pw`: its rows j = 16 b + i (slot pw + 4 i of block b), copied into ring row
// j % kRingRows, decoded into tile b % 2. Lane l decodes values 16 l .. 16 l + 15 of a row.
// Each block's 64 cache rows are looked up once, by 64 producer threads, into a table a block
// ahead of the copies (a lookup per row on the warp's own path, its dependent loads and a 64-bit
// remainder, left the consumers waiting for the producer).
template <int D>
__device__ void produce(const AttnArgs& a, int64_t t, uint8_t* smem, int pw, int lane) {
  using L = Layout<D>;
  constexpr int kUnit = copy_unit(D), kStride = raw_stride(D);
  uint8_t* const ring = smem + L::kRing + static_cast<size_t>(pw) * kRingRows * kStride;
  uint8_t* const flags = smem + L::kFlags + pw * kRingRows;
  uintptr_t* const table = reinterpret_cast<uintptr_t*>(smem + L::kTable);
  const int ptid = 32 * pw + lane;
  const int64_t rows = a.blocks * kRowsPerWarp;
  // The query's window (slot_row's lookup, the ring slot of its first position found once).
  const int64_t p = a.positions[t], first = lmax(0, p - a.window + 1);
  const int64_t first_slot = a.window > 0 ? first % a.window : 0;
  const int64_t win_bytes = window_row_bytes(D), step_first = a.step_values[0];
  // Block b's rows into table b % kTables: the row's address, bit 0 set for an FP4 entry, 0 for
  // an empty slot; thread `ptid` - 64 h looks up slot ptid of block b (h: which half does it).
  auto fill_table = [&](int64_t b, int h) {
    if (b >= a.blocks || ptid < 64 * h || ptid >= 64 * (h + 1)) return;
    const int64_t s = b * kBlockSlots + (ptid - 64 * h);
    bool fp4 = false;
    const uint8_t* row = nullptr;
    if (s >= a.window) {
      row = slot_row(a, t, s, &fp4);
    } else if (const int64_t pos = first + s; pos <= p) {
      if (pos >= step_first) {
        row = a.step + (pos - step_first) * win_bytes;
      } else {
        int64_t slot = first_slot + s;
        if (slot >= a.window) slot -= a.window;
        row = a.ring_positions[slot] == pos ? a.ring + slot * win_bytes : nullptr;
      }
    }
    table[(b % kTables) * kBlockSlots + (ptid - 64 * h)] =
        row == nullptr ? 0 : reinterpret_cast<uintptr_t>(row) | (fp4 ? 1 : 0);
  };
  auto issue = [&](int64_t j) {
    if (j < rows) {
      const int64_t b = j / kRowsPerWarp;
      const uintptr_t e =
          table[(b % kTables) * kBlockSlots + pw + kProducerWarps * (j % kRowsPerWarp)];
      const bool fp4 = (e & 1) != 0;
      const uint8_t* row = reinterpret_cast<const uint8_t*>(e & ~uintptr_t{1});
      uint8_t* dst = ring + (j % kRingRows) * kStride;
      if (row != nullptr) {
        const int bytes = fp4 ? entry_row_bytes(D) : window_row_bytes(D);
        for (int at = lane * kUnit; at < bytes; at += 32 * kUnit)
          async_copy<kUnit>(dst + at, row + at);
      }
      if (lane == 0) flags[j % kRingRows] = (row != nullptr ? 1 : 0) | (fp4 ? 2 : 0);
    }
    async_commit();  // one group a row, empty or not: the waits below count rows
  };
  fill_table(0, 0);
  fill_table(1, 1);
  named_barrier_sync(kProducerBarrier, 128);
  for (int j = 0; j < kRingRows; ++j) issue(j);
  int has = 0;
  for (int64_t j = 0; j < rows; ++j) {
    const int64_t b = j / kRowsPerWarp;
    const int i = static_cast<int>(j % kRowsPerWarp), tile = static_cast<int>(b & 1);
    if (i == 0) {
      // Block b + 1's rows are copied from row 16 b + 16 - kRingRows on; its table's last user,
      // block b + 1 - kTables, was copied before every warp reached block b - 1's barrier.
      if (b >= 1) {
        fill_table(b + 1, 0);
        named_barrier_sync(kProducerBarrier, 128);
      }
      if (b >= 2) named_barrier_sync(kFreeBarrier + tile, kThreads);
    }
    async_wait<kRingRows - 1>();  // row j has landed (this lane's copies)
    __syncwarp();                 // and every lane's
    const int f = flags[j % kRingRows];
    const uint8_t* raw = ring + (j % kRingRows) * kStride;
    const int s = pw + kProducerWarps * i;
    if (lane < D / 16) {
      const int d = 16 * lane;
      uint4 v0 = uint4{0u, 0u, 0u, 0u}, v1 = v0;
      if (f == 3) {
        const uint2 w = load_aligned<uint2>(raw + d / 2);
        const uint32_t scale = e4m3_bf16x2(raw[D / 2 + d / 16]);
        v0 = e2m1x8_scaled_bf16(w.x, scale);
        v1 = e2m1x8_scaled_bf16(w.y, scale);
      } else if (f == 1) {
        const uint4 w = load_aligned<uint4>(raw + d);
        const uint32_t scale = raw[D + d / 32];
        v0 = e4m3x8_to_bf16(w.x, w.y, scale);
        v1 = e4m3x8_to_bf16(w.z, w.w, scale);
      }
      // Values d .. d + 15 are chunks c and c + 1 of panel d / 64's row s (wgmma.cuh's swizzle).
      // Lanes 4 .. 7 of each eight store their odd chunk first: the eight lanes of a store then
      // cover the eight chunk columns (the even ones alone fell on four, two lanes a bank).
      uint8_t* panel = smem + L::kTiles + tile * L::kTileBytes + (d / 64) * kPanelBytes;
      const int c = (d % 64) / 8;
      const bool odd_first = (lane & 4) != 0;
      *reinterpret_cast<uint4*>(panel + swizzled_chunk(s, odd_first ? c + 1 : c)) =
          odd_first ? v1 : v0;
      *reinterpret_cast<uint4*>(panel + swizzled_chunk(s, odd_first ? c : c + 1)) =
          odd_first ? v0 : v1;
    }
    if (lane == 0) smem[L::kValid + tile * kBlockSlots + s] = f & 1;
    has |= f & 1;
    __syncwarp();  // every lane has read ring row j % kRingRows
    issue(j + kRingRows);
    if (i == kRowsPerWarp - 1) {
      if (lane == 0) reinterpret_cast<int*>(smem + L::kHas)[tile * kProducerWarps + pw] = has;
      has = 0;
      fence_shared_for_async();  // the tile's stores, before the tensor cores read it
      named_barrier_arrive(kFullBarrier + tile, kThreads);
    }
  }
}

// Adds a product's fresh sums into the running ones (FP32, rounded to nearest).
template <int N>
__device__ __forceinline__ void add_sums(float (&to)[N], float (&fresh)[N]) {
  wgmma_hold(fresh);
  FD_UNROLL
  for (int i = 0; i < N; ++i) to[i] += fresh[i];
}

// A consumer warpgroup `c` (warp w of it, lane): the products, the block step and the output.
template <int D>
__device__ void consume(const AttnArgs& a, const float* sink, float* out, int64_t t, uint8_t* smem,
                        int c, int w, int lane) {
  using L = Layout<D>;
  constexpr int kSteps = D / 16;                     // S's k16 products
  constexpr int kPanels = D / 128;                   // PV's 64-dim panels a warpgroup
  constexpr int kPvUnits = 4 / kSumSteps * kPanels;  // PV's sums a block (4 k16 steps of slots)
  uint16_t* const qs = reinterpret_cast<uint16_t*>(smem + L::kQ);
  uint16_t* const ps = reinterpret_cast<uint16_t*>(smem + L::kP);
  float* const maxima = reinterpret_cast<float*>(smem + L::kMaxima);
  float* const sums = reinterpret_cast<float*>(smem + L::kSums);
  const int* const has = reinterpret_cast<const int*>(smem + L::kHas);
  const int tid = c * 128 + w * 32 + lane;
  const int g = lane >> 2, q = lane & 3;
  const int r0 = 16 * w + g, r1 = r0 + 8;  // this thread's heads (accumulator rows)

  // Q as BF16 (the definition's q is a BF16 value); rows past the heads are zero. Eight loads in
  // flight a thread: a CTA waits for its query before its first product, with nothing else of
  // its own to run.
  constexpr int kQLoads = kHeads * D / 4 / kConsumerThreads, kQBatch = 8;
  static_assert(kQLoads % kQBatch == 0);
  FD_UNROLL_BY(1)
  for (int i0 = 0; i0 < kQLoads; i0 += kQBatch) {
    float4 x[kQBatch];
    FD_UNROLL
    for (int u = 0; u < kQBatch; ++u) {
      const int i = tid + (i0 + u) * kConsumerThreads, h = i / (D / 4), d = i % (D / 4) * 4;
      x[u] = h < a.heads ? load_aligned<float4>(a.q + (t * a.heads + h) * D + d)
                         : float4{0.0f, 0.0f, 0.0f, 0.0f};
    }
    FD_UNROLL
    for (int u = 0; u < kQBatch; ++u) {
      const int i = tid + (i0 + u) * kConsumerThreads, h = i / (D / 4), d = i % (D / 4) * 4;
      *reinterpret_cast<uint2*>(qs + h * L::kQStride + d) =
          uint2{pack_bf16_pair(f32_to_bf16_bits(x[u].x), f32_to_bf16_bits(x[u].y)),
                pack_bf16_pair(f32_to_bf16_bits(x[u].z), f32_to_bf16_bits(x[u].w))};
    }
  }
  // ldmatrix rows of this lane (A fragments: rows (lane & 7) + 8 ((lane >> 3) & 1) of the warp's
  // 16, k half lane >> 4), for Q and for P.
  const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_k = 8 * (lane >> 4);
  const uint16_t* const q_frag = qs + (16 * w + a_row) * L::kQStride + a_k;
  const uint16_t* const p_frag = ps + (16 * w + a_row) * kPStride + a_k;

  float m[2] = {kMinit, kMinit}, den[2] = {0.0f, 0.0f};
  float acc[kPanels][32];
  FD_UNROLL
  for (int p = 0; p < kPanels; ++p) FD_UNROLL
  for (int i = 0; i < 32; ++i) acc[p][i] = 0.0f;

  for (int64_t b = 0; b < a.blocks; ++b) {
    const int tile = static_cast<int>(b & 1);
    uint8_t* const keys = smem + L::kTiles + tile * L::kTileBytes;
    named_barrier_sync(kFullBarrier + tile, kThreads);  // also orders Q's staging, at b = 0
    const int* const any = has + tile * kProducerWarps;
    if (any[0] | any[1] | any[2] | any[3]) {
      // 1. S for this warpgroup's 32 slots: accumulator 4j + e (+ 2: head r1) is slot 32 c + 8 j
      // + 2 q + e.
      // kSDepth sums of kSumSteps products in flight, Q's fragments loaded a product ahead.
      constexpr int kUnits = kSteps / kSumSteps, kQa = kSDepth * kSumSteps + 1;
      float s[16], fresh[kSDepth][16];
      FD_UNROLL
      for (int i = 0; i < 16; ++i) {
        s[i] = 0.0f;
        FD_UNROLL
        for (int x = 0; x < kSDepth; ++x) fresh[x][i] = 0.0f;
      }
      uint32_t qa[kQa][4];
      const uint64_t s_desc = wgmma_descriptor(keys + c * 32 * kWgmmaRowBytes);
      ldmatrix_x4(qa[0], q_frag);
      FD_UNROLL
      for (int k = 0; k < kSteps; ++k) {
        const int u = k / kSumSteps, h = k % kSumSteps;
        wgmma_fence();
        wgmma_m64nNk16_bf16_rs<32>(fresh[u % kSDepth], qa[k % kQa],
                                   s_desc + (((k / 4) * kPanelBytes + (k % 4) * 32) >> 4), h != 0);
        wgmma_commit();
        if (k + 1 < kSteps) ldmatrix_x4(qa[(k + 1) % kQa], q_frag + 16 * (k + 1));
        if (h == kSumSteps - 1 && u >= kSDepth - 1) {
          wgmma_wait<(kSDepth - 1) * kSumSteps>();
          add_sums(s, fresh[(u - kSDepth + 1) % kSDepth]);
        }
      }
      wgmma_wait<0>();
      FD_UNROLL
      for (int u = kUnits - kSDepth + 1; u < kUnits; ++u) add_sums(s, fresh[u % kSDepth]);

      // 2. The block step: scores scaled, -inf for empty slots; both warpgroups' maxima.
      const uint8_t* valid = smem + L::kValid + tile * kBlockSlots + 32 * c;
      float mx[2] = {-INFINITY, -INFINITY};
      FD_UNROLL
      for (int j = 0; j < 4; ++j) FD_UNROLL
      for (int e = 0; e < 2; ++e) {
        const bool ok = valid[8 * j + 2 * q + e] != 0;
        FD_UNROLL
        for (int h = 0; h < 2; ++h) {
          float& v = s[4 * j + 2 * h + e];
          v = ok ? v * a.softmax_scale : -INFINITY;
          mx[h] = fmaxf(mx[h], v);
        }
      }
      FD_UNROLL
      for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(kFullMask, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(kFullMask, mx[h], 2));
      }
      if (q == 0) {
        maxima[c * kHeads + r0] = mx[0];
        maxima[c * kHeads + r1] = mx[1];
      }
      named_barrier_sync(kConsumerBarrier, kConsumerThreads);
      float corr[2];
      FD_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int r = h == 0 ? r0 : r1;
        const float m_new = fmaxf(m[h], fmaxf(maxima[r], maxima[kHeads + r]));
        corr[h] = expf(m[h] - m_new);
        m[h] = m_new;
        float sum = 0.0f;
        FD_UNROLL
        for (int j = 0; j < 4; ++j) {
          const float p0 = expf(s[4 * j + 2 * h] - m_new), p1 = expf(s[4 * j + 2 * h + 1] - m_new);
          sum += p0;
          sum += p1;
          *reinterpret_cast<uint32_t*>(ps + r * kPStride + 32 * c + 8 * j + 2 * q) =
              pack_bf16_pair(f32_to_bf16_bits(p0), f32_to_bf16_bits(p1));
        }
        den[h] = den[h] * corr[h] + sum;
      }
      named_barrier_sync(kConsumerBarrier, kConsumerThreads);  // P whole, the maxima read

      // 3. acc = acc * c + P V over this warpgroup's panels: accumulator 4j + e (+ 2: head r1) of
      // panel p is head dim 64 (kPanels c + p) + 8 j + 2 q + e.
      FD_UNROLL
      for (int p = 0; p < kPanels; ++p) FD_UNROLL
      for (int i = 0; i < 32; ++i) acc[p][i] *= corr[(i % 4) / 2];
      uint32_t pa[4][4];
      FD_UNROLL
      for (int k = 0; k < 4; ++k) ldmatrix_x4(pa[k], p_frag + 16 * k);
      float pv[2][32];
      FD_UNROLL
      for (int i = 0; i < 32; ++i) pv[0][i] = pv[1][i] = 0.0f;
      const uint64_t v_desc = wgmma_descriptor_transposed(keys + c * kPanels * kPanelBytes);
      FD_UNROLL
      for (int u = 0; u < kPvUnits; ++u) {
        const int m0 = u / kPanels, p = u % kPanels;
        wgmma_fence();
        FD_UNROLL
        for (int h = 0; h < kSumSteps; ++h) {
          const int k = m0 * kSumSteps + h;
          wgmma_m64nNk16_bf16_rs<64, true>(
              pv[u & 1], pa[k], v_desc + ((p * kPanelBytes + k * 16 * kWgmmaRowBytes) >> 4),
              h != 0);
          wgmma_commit();
        }
        if (u > 0) {
          wgmma_wait<kSumSteps>();
          add_sums(acc[(u - 1) % kPanels], pv[(u - 1) & 1]);
        }
      }
      wgmma_wait<0>();
      add_sums(acc[(kPvUnits - 1) % kPanels], pv[(kPvUnits - 1) & 1]);
    }
    // Every product reading this tile has finished: the producer may refill it (for block b + 2).
    if (b + 2 < a.blocks) named_barrier_arrive(kFreeBarrier + tile, kThreads);
  }

  // out = bf16(acc / (den + exp(sink - m))), 0 where no slot had a key; den summed over the
  // quad's lanes and both warpgroups.
  FD_UNROLL
  for (int h = 0; h < 2; ++h) {
    den[h] += __shfl_xor_sync(kFullMask, den[h], 1);
    den[h] += __shfl_xor_sync(kFullMask, den[h], 2);
  }
  if (q == 0) {
    sums[c * kHeads + r0] = den[0];
    sums[c * kHeads + r1] = den[1];
  }
  named_barrier_sync(kConsumerBarrier, kConsumerThreads);
  FD_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int r = h == 0 ? r0 : r1;
    if (r >= a.heads) continue;
    const float total = sums[r] + sums[kHeads + r] + expf(sink[r] - m[h]);
    const bool none = m[h] <= kMinit;
    float* o = out + (t * a.heads + r) * D + 64 * kPanels * c + 2 * q;
    FD_UNROLL
    for (int p = 0; p < kPanels; ++p) FD_UNROLL
    for (int j = 0; j < 8; ++j) {
      float2 v;
      v.x = none ? 0.0f : round_bf16(acc[p][4 * j + 2 * h] / total);
      v.y = none ? 0.0f : round_bf16(acc[p][4 * j + 2 * h + 1] / total);
      *reinterpret_cast<float2*>(o + 64 * p + 8 * j) = v;
    }
  }
}

// grid (n): query blockIdx.x; head dim D.
template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    attn_wgmma_kernel(AttnArgs a, const float* sink, float* out) {
#if FD_HAVE_WGMMA
  FD_GRID_PROLOGUE();
  FD_DYNAMIC_SMEM(uint8_t, raw_smem);
  // The key tiles on a 1 KiB boundary (the swizzle's atoms).
  uint8_t* const smem =
      raw_smem + (kWgmmaAtomBytes - shared_address(raw_smem) % kWgmmaAtomBytes) % kWgmmaAtomBytes;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31u);
  const int64_t t = blockIdx.x;
  if (warp >= 8) {
    lower_registers<kProducerRegisters>();
    produce<D>(a, t, smem, warp - 8, lane);
  } else {
    raise_registers<kConsumerRegisters>();
    consume<D>(a, sink, out, t, smem, warp / 4, warp % 4, lane);
  }
#else
  (void)a, (void)sink, (void)out;
#endif
}

template <int D>
bool launch_wgmma(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out) {
  if (!rows_aligned_for_copies(a, D)) return false;
  constexpr size_t kBytes = Layout<D>::kLaunchBytes;
  allow_dynamic_smem<attn_wgmma_kernel<D>>(kBytes);
  FD_LAUNCH((attn_wgmma_kernel<D>), dim3(static_cast<unsigned>(a.n)), dim3(kThreads), kBytes,
            stream, a, sink, out);
  return true;
}

}  // namespace

bool attention_on_warpgroups(cudaStream_t stream, const AttnArgs& a, const float* sink,
                             float* out) {
  // grouped_wgmma_runs: whether this device runs the sm_90a object's kernels.
  if (a.n == 0 || a.heads < 1 || a.heads > kHeads || !grouped_wgmma_runs()) return false;
  switch (a.dim) {
    case 128:
      return launch_wgmma<128>(stream, a, sink, out);
    case 256:
      return launch_wgmma<256>(stream, a, sink, out);
    case 512:
      return launch_wgmma<512>(stream, a, sink, out);
    default:
      return false;
  }
}

}  // namespace flashdesk::cuda
