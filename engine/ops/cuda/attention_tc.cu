// Sparse attention of prefill-sized calls on the tensor cores (docs/numerics.md "Sparse
// attention"; the CUDA-core kernels of attention.cu take decode). One CTA per query walks its key
// list in the definition's 64-slot blocks with every head at once: all heads share the query's
// keys (one KV head), so a block's keys are decoded into shared memory once and the two products
// are matrix products on the tensor cores (mma.cuh):
//   0. The next block's cache rows are copied (cp.async) into a raw buffer while this block
//      computes: the rows are scattered over the caches, and their latency is hidden behind the
//      products. At a block's start its raw rows are decoded into BF16 keys (bf16_codes.cuh).
//   1. S = Q K^T for the block: heads (16-row groups) by 64 slots, the head dim as k; warp w
//      takes head group w % HG and 64 / kSlotGroups slots; S * scale, -inf for empty slots.
//   2. The definition's block step per head (8 lanes a head, 8 slots a lane): m' = max(m, max s),
//      c = exp(m - m'), p = exp(s - m'), den = den * c + sum p, P = bf16(p).
//   3. acc = acc * c + P V: heads by the head dim, the 64 slots as k; warp w takes dims
//      [w D / kPvWarps, (w + 1) D / kPvWarps) of every head.
// Sixteen warps (four a scheduler) hide the products' and the shared loads' latency; each thread
// holds 64 accumulators (64 heads x 512 dims over 512 threads).
// Fragments come from shared memory by ldmatrix (the values' B fragments by its transposed form).
// At the end den += exp(sink - m) and out = bf16(acc / den) (0 where no slot had a key). Q is BF16
// (the definition's q is a BF16 value), keys are exact in BF16 (FP8 x UE8M0, FP4 x E4M3), P is
// rounded to BF16 by the definition: every product is the definition's, and only the order and
// the tensor cores' rounding of the FP32 sums differ (the same class of difference as the
// CUDA-core kernels' split sums).
#include "engine/ops/cuda/async_copy.cuh"
#include "engine/ops/cuda/attention_args.cuh"
#include "engine/ops/cuda/bf16_codes.cuh"
#include "engine/ops/cuda/mma.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kWarps = 16;
constexpr int kThreads = 32 * kWarps;
constexpr int kSoftmaxHeads = kWarps * 4;  // heads a softmax pass covers (4 a warp)
constexpr int kMaxHeadGroups = 4;          // 64 heads
constexpr int kKeyPad = 8;    // BF16 values after each staged row: ldmatrix rows 4 banks apart
constexpr int kScorePad = 8;  // floats after each score row: the softmax's loads on 32 banks

// Shared memory of a CTA, in this order: Q [16 HG][D + pad] bf16, keys [64][D + pad] bf16, raw
// rows [64][raw_stride], P [16 HG][64 + pad] bf16, S [16 HG][64 + pad] f32, then per head m, den,
// c (f32).
struct Smem {
  int q_stride, key_stride, p_stride, s_stride;
  size_t q_off, key_off, raw_off, p_off, s_off, m_off, den_off, c_off, bytes;
};
__host__ __device__ inline Smem smem_layout(int hg, int dim) {
  Smem l{};
  const int rows = 16 * hg;
  l.q_stride = dim + kKeyPad;
  l.key_stride = dim + kKeyPad;
  l.p_stride = kBlockSlots + kKeyPad;
  l.s_stride = kBlockSlots + kScorePad;
  l.q_off = 0;
  l.key_off = l.q_off + static_cast<size_t>(rows * l.q_stride) * 2;
  l.raw_off = l.key_off + static_cast<size_t>(kBlockSlots * l.key_stride) * 2;
  l.p_off = l.raw_off + static_cast<size_t>(kBlockSlots * raw_stride(dim));
  l.s_off = l.p_off + static_cast<size_t>(rows * l.p_stride) * 2;
  l.m_off = l.s_off + static_cast<size_t>(rows * l.s_stride) * 4;
  l.den_off = l.m_off + static_cast<size_t>(rows) * 4;
  l.c_off = l.den_off + static_cast<size_t>(rows) * 4;
  l.bytes = l.c_off + static_cast<size_t>(rows) * 4;
  return l;
}

// Threads 0..63: block b's cache rows of query t and their formats; any[w] says whether warp w's
// 32 slots hold a key.
__device__ __forceinline__ void find_block_rows(const AttnArgs& a, int64_t t, int64_t b,
                                                const uint8_t** rows, uint8_t* fp4s, int* any) {
  if (threadIdx.x >= kBlockSlots) return;
  bool fp4 = false;
  const uint8_t* row = slot_row(a, t, b * kBlockSlots + threadIdx.x, &fp4);
  rows[threadIdx.x] = row;
  fp4s[threadIdx.x] = fp4;
  const unsigned has = __ballot_sync(kFullMask, row != nullptr);
  if ((threadIdx.x & 31u) == 0) any[threadIdx.x >> 5] = has != 0;
}

// Every thread: its share of a block's row copies into `raw` (in flight until the caller's wait).
template <int D>
__device__ __forceinline__ void copy_block_rows(const uint8_t* const* rows, const uint8_t* fp4s,
                                                uint8_t* raw) {
  constexpr int kUnit = copy_unit(D), kStride = raw_stride(D), kUnits = kStride / kUnit;
  for (int i = static_cast<int>(threadIdx.x); i < kBlockSlots * kUnits; i += kThreads) {
    const int s = i / kUnits, at = i % kUnits * kUnit;
    const uint8_t* row = rows[s];
    if (row == nullptr || at >= (fp4s[s] ? entry_row_bytes(D) : window_row_bytes(D))) continue;
    if constexpr (kUnit >= 4)
      async_copy<kUnit>(raw + s * kStride + at, row + at);
    else
      *reinterpret_cast<uint16_t*>(raw + s * kStride + at) =
          *reinterpret_cast<const uint16_t*>(row + at);
  }
}

// Every thread: a block's raw rows as BF16 keys, 16 values a step (one FP4 scale, half an FP8
// one; 0 for empty slots).
template <int D>
__device__ __forceinline__ void decode_block_keys(const uint8_t* raw, const uint8_t* const* rows,
                                                  const uint8_t* fp4s, uint16_t* keys,
                                                  int key_stride) {
  constexpr int kStride = raw_stride(D), kGroupsPerRow = D / 16;
  FD_UNROLL_BY(2)
  for (int g = static_cast<int>(threadIdx.x); g < kBlockSlots * kGroupsPerRow; g += kThreads) {
    const int s = g / kGroupsPerRow, d = g % kGroupsPerRow * 16;
    const uint8_t* row = raw + s * kStride;
    uint4 v0 = uint4{0u, 0u, 0u, 0u}, v1 = v0;
    if (rows[s] != nullptr && fp4s[s]) {
      const uint2 w = load_aligned<uint2>(row + d / 2);
      const uint32_t scale = e4m3_bf16x2(row[D / 2 + d / 16]);
      v0 = e2m1x8_scaled_bf16(w.x, scale);
      v1 = e2m1x8_scaled_bf16(w.y, scale);
    } else if (rows[s] != nullptr) {
      const uint4 w = load_aligned<uint4>(row + d);
      const uint32_t scale = row[D + d / 32];
      v0 = e4m3x8_to_bf16(w.x, w.y, scale);
      v1 = e4m3x8_to_bf16(w.z, w.w, scale);
    }
    uint4* to = reinterpret_cast<uint4*>(keys + s * key_stride + d);
    to[0] = v0;
    to[1] = v1;
  }
}

// grid (n): query blockIdx.x, HG groups of 16 heads, head dim D.
template <int HG, int D>
__global__ void __launch_bounds__(kThreads)
    attn_tc_kernel(AttnArgs a, const float* sink, float* out) {
  FD_GRID_PROLOGUE();
  // S: warps a head group's 64 slots are split over (8-slot tiles at least); PV: warps the head
  // dim is split over (8 dims at least) and each one's 8-dim tiles.
  constexpr int kSlotGroups = kWarps / HG < 8 ? kWarps / HG : 8, kSlotTiles = 8 / kSlotGroups;
  constexpr int kPvWarps = D / 8 < kWarps ? D / 8 : kWarps, kDimTiles = D / 8 / kPvWarps;
  const Smem l = smem_layout(HG, D);
  FD_DYNAMIC_SMEM(unsigned char, smem);
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem + l.q_off);
  uint16_t* keys = reinterpret_cast<uint16_t*>(smem + l.key_off);
  uint8_t* raw = smem + l.raw_off;
  uint16_t* ps = reinterpret_cast<uint16_t*>(smem + l.p_off);
  float* ss = reinterpret_cast<float*>(smem + l.s_off);
  float* m_run = reinterpret_cast<float*>(smem + l.m_off);
  float* den = reinterpret_cast<float*>(smem + l.den_off);
  float* corr = reinterpret_cast<float*>(smem + l.c_off);
  // Two sets (block b's is b & 1): the next block's rows are found while this one's are in use.
  __shared__ const uint8_t* rows[2][kBlockSlots];
  __shared__ uint8_t fp4s[2][kBlockSlots];
  __shared__ int any[2][2];

  const int64_t t = blockIdx.x;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, c = 2 * (lane & 3);
  find_block_rows(a, t, 0, rows[0], fp4s[0], any[0]);
  __syncthreads();
  copy_block_rows<D>(rows[0], fp4s[0], raw);
  async_commit();
  for (int i = static_cast<int>(threadIdx.x); i < 16 * HG * D / 4; i += kThreads) {
    const int h = i / (D / 4), d = i % (D / 4) * 4;
    uint2 v = uint2{0u, 0u};
    if (h < a.heads) {
      const float4 x = load_aligned<float4>(a.q + (t * a.heads + h) * D + d);
      v = uint2{pack_bf16_pair(f32_to_bf16_bits(x.x), f32_to_bf16_bits(x.y)),
                pack_bf16_pair(f32_to_bf16_bits(x.z), f32_to_bf16_bits(x.w))};
    }
    *reinterpret_cast<uint2*>(qs + h * l.q_stride + d) = v;
  }
  for (int h = static_cast<int>(threadIdx.x); h < 16 * HG; h += kThreads) {
    m_run[h] = kMinit;
    den[h] = 0.0f;
  }
  float acc[HG][kDimTiles][4];
  FD_UNROLL
  for (int hg = 0; hg < HG; ++hg) FD_UNROLL
  for (int nt = 0; nt < kDimTiles; ++nt) FD_UNROLL
  for (int i = 0; i < 4; ++i) acc[hg][nt][i] = 0.0f;

  // ldmatrix rows of this lane. S: A = Q rows (lane & 7) + 8 ((lane >> 3) & 1) of head group
  // warp % HG, k half lane >> 4; B = key rows (slots) n0 + 8 (lane >> 4) + (lane & 7), k half
  // (lane >> 3) & 1 (two 8-slot tiles an x4). PV: A = P rows as Q's; B = value rows (slots)
  // 8 ((lane >> 3) & 1) + (lane & 7), dims 8 (lane >> 4) on from the warp's (two 8-dim tiles an
  // x4).
  const int s_hg = warp % HG, s_n0 = warp / HG * 8 * kSlotTiles;
  const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_k = 8 * (lane >> 4);
  const uint16_t* q_frag = qs + (16 * s_hg + a_row) * l.q_stride + a_k;
  const uint16_t* k_frag =
      keys + (s_n0 + 8 * (lane >> 4) + (lane & 7)) * l.key_stride + 8 * ((lane >> 3) & 1);
  const uint16_t* v_frag = keys + (8 * ((lane >> 3) & 1) + (lane & 7)) * l.key_stride +
                           warp * (D / kPvWarps) + 8 * (lane >> 4);

  for (int64_t b = 0; b < a.blocks; ++b) {
    const int set = static_cast<int>(b & 1);
    async_wait<0>();
    // Block b's rows have landed (every thread's copies); the previous block's keys, S and P
    // are read; the next block's row set is free.
    __syncthreads();
    const bool has = any[set][0] || any[set][1];
    if (has) decode_block_keys<D>(raw, rows[set], fp4s[set], keys, l.key_stride);
    if (b + 1 < a.blocks) find_block_rows(a, t, b + 1, rows[set ^ 1], fp4s[set ^ 1], any[set ^ 1]);
    __syncthreads();  // keys decoded, raw free, the next block's rows found
    if (b + 1 < a.blocks) copy_block_rows<D>(rows[set ^ 1], fp4s[set ^ 1], raw);
    async_commit();
    if (!has) continue;  // no key: the block changes nothing
    // 1. S for head group s_hg, slots s_n0 .. s_n0 + 8 kSlotTiles - 1.
    if (warp < HG * kSlotGroups) {
      float s[kSlotTiles][4];
      FD_UNROLL
      for (int nt = 0; nt < kSlotTiles; ++nt) FD_UNROLL
      for (int i = 0; i < 4; ++i) s[nt][i] = 0.0f;
      FD_UNROLL_BY(4)
      for (int k0 = 0; k0 < D; k0 += 16) {
        uint32_t af[4];
        ldmatrix_x4(af, q_frag + k0);
        uint32_t bf[kSlotTiles][2];
        if constexpr (kSlotTiles == 1) {
          ldmatrix_x2(bf[0], k_frag + k0);
        } else {
          FD_UNROLL
          for (int p = 0; p < kSlotTiles / 2; ++p) {
            uint32_t r[4];
            ldmatrix_x4(r, k_frag + 16 * p * l.key_stride + k0);
            bf[2 * p][0] = r[0];
            bf[2 * p][1] = r[1];
            bf[2 * p + 1][0] = r[2];
            bf[2 * p + 1][1] = r[3];
          }
        }
        FD_UNROLL
        for (int nt = 0; nt < kSlotTiles; ++nt) {
          // Each mma sums only its own 16 products (the tensor cores truncate as they
          // accumulate: a running sum kept inside them drifted a bounded-mode golden row by
          // 2.6e-2), and the FP32 additions of the parts are rounded to nearest.
          float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma_bf16_16816(part, af, bf[nt]);
          FD_UNROLL
          for (int i = 0; i < 4; ++i) s[nt][i] += part[i];
        }
      }
      FD_UNROLL
      for (int nt = 0; nt < kSlotTiles; ++nt) {
        const int slot = s_n0 + 8 * nt + c;
        const bool v0 = rows[set][slot] != nullptr, v1 = rows[set][slot + 1] != nullptr;
        float* r0 = ss + (16 * s_hg + g) * l.s_stride + slot;
        float* r8 = r0 + 8 * l.s_stride;
        r0[0] = v0 ? s[nt][0] * a.softmax_scale : -INFINITY;
        r0[1] = v1 ? s[nt][1] * a.softmax_scale : -INFINITY;
        r8[0] = v0 ? s[nt][2] * a.softmax_scale : -INFINITY;
        r8[1] = v1 ? s[nt][3] * a.softmax_scale : -INFINITY;
      }
    }
    __syncthreads();
    // 2. The block step of each head: head 4 warp + lane / 8 (each pass), slots q + 8 i of it for
    // q = lane % 8 (the 8 lanes' loads on distinct banks), the head's max and sum over its lanes.
    for (int h0 = 0; h0 < a.heads; h0 += kSoftmaxHeads) {
      const int h = h0 + 4 * warp + (lane >> 3), q = lane & 7;
      const int row = h < 16 * HG ? h : 16 * HG - 1;  // past the staged rows: read one, keep none
      float sv[8];
      float mx = -INFINITY;
      FD_UNROLL
      for (int i = 0; i < 8; ++i) {
        sv[i] = ss[row * l.s_stride + q + 8 * i];
        mx = fmaxf(mx, sv[i]);
      }
      FD_UNROLL
      for (int o = 1; o < 8; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, o));
      const float m = m_run[row], m_new = fmaxf(m, mx);
      float sum = 0.0f;
      FD_UNROLL
      for (int i = 0; i < 8; ++i) {
        const float p = expf(sv[i] - m_new);
        sum += p;
        if (h < a.heads) ps[h * l.p_stride + q + 8 * i] = f32_to_bf16_bits(p);
      }
      FD_UNROLL
      for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(kFullMask, sum, o);
      if (q == 0 && h < a.heads) {
        const float cf = expf(m - m_new);
        corr[h] = cf;
        den[h] = den[h] * cf + sum;
        m_run[h] = m_new;
      }
    }
    __syncthreads();
    // 3. acc = acc * c + P V over this warp's dims.
    if (warp >= kPvWarps) continue;
    FD_UNROLL
    for (int hg = 0; hg < HG; ++hg) {
      const int h0 = 16 * hg + g;
      const float c0 = h0 < a.heads ? corr[h0] : 1.0f, c8 = h0 + 8 < a.heads ? corr[h0 + 8] : 1.0f;
      FD_UNROLL
      for (int nt = 0; nt < kDimTiles; ++nt) {
        acc[hg][nt][0] *= c0;
        acc[hg][nt][1] *= c0;
        acc[hg][nt][2] *= c8;
        acc[hg][nt][3] *= c8;
      }
    }
    FD_UNROLL_BY(1)
    for (int k0 = 0; k0 < kBlockSlots; k0 += 16) {
      uint32_t af[HG][4];
      FD_UNROLL
      for (int hg = 0; hg < HG; ++hg)
        ldmatrix_x4(af[hg], ps + (16 * hg + a_row) * l.p_stride + k0 + a_k);
      FD_UNROLL
      for (int p = 0; p < (kDimTiles + 1) / 2; ++p) {
        uint32_t bf[2][2];
        if constexpr (kDimTiles == 1) {
          ldmatrix_x2_trans(bf[0], v_frag + k0 * l.key_stride);
        } else {
          uint32_t r[4];
          ldmatrix_x4_trans(r, v_frag + k0 * l.key_stride + 16 * p);
          bf[0][0] = r[0];
          bf[0][1] = r[1];
          bf[1][0] = r[2];
          bf[1][1] = r[3];
        }
        FD_UNROLL
        for (int j = 0; j < (kDimTiles == 1 ? 1 : 2); ++j) {
          FD_UNROLL
          for (int hg = 0; hg < HG; ++hg) {
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // as for S: 16 products an mma
            mma_bf16_16816(part, af[hg], bf[j]);
            FD_UNROLL
            for (int i = 0; i < 4; ++i) acc[hg][2 * p + j][i] += part[i];
          }
        }
      }
    }
  }
  // out = bf16(acc / (den + exp(sink - m))), 0 where no slot had a key.
  if (warp >= kPvWarps) return;
  FD_UNROLL
  for (int hg = 0; hg < HG; ++hg) {
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int h = 16 * hg + g + 8 * half;
      if (h >= a.heads) continue;
      const float m = m_run[h], total = den[h] + expf(sink[h] - m);
      float* o = out + (t * a.heads + h) * D + warp * (D / kPvWarps) + c;
      FD_UNROLL
      for (int nt = 0; nt < kDimTiles; ++nt) {
        float2 r;
        r.x = m <= kMinit ? 0.0f : round_bf16(acc[hg][nt][2 * half] / total);
        r.y = m <= kMinit ? 0.0f : round_bf16(acc[hg][nt][2 * half + 1] / total);
        *reinterpret_cast<float2*>(o + 8 * nt) = r;
      }
    }
  }
}

template <int HG, int D>
bool launch_tc(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out) {
  if (!rows_aligned_for_copies(a, D)) return false;
  const size_t bytes = smem_layout(HG, D).bytes;
  allow_dynamic_smem<attn_tc_kernel<HG, D>>(bytes);
  FD_LAUNCH((attn_tc_kernel<HG, D>), dim3(static_cast<unsigned>(a.n)), dim3(kThreads), bytes,
            stream, a, sink, out);
  return true;
}

template <int D>
bool launch_for_dim(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out) {
  switch ((a.heads + 15) / 16) {
    case 1:
      return launch_tc<1, D>(stream, a, sink, out);
    case 2:
      return launch_tc<2, D>(stream, a, sink, out);
    case 3:
    case 4:
      return launch_tc<4, D>(stream, a, sink, out);
    default:
      return false;
  }
}

}  // namespace

bool attention_on_tensor_cores(cudaStream_t stream, const AttnArgs& a, const float* sink,
                               float* out) {
  if (a.n == 0 || a.heads < 1 || a.heads > 16 * kMaxHeadGroups) return false;
  switch (a.dim) {
    case 64:
      return launch_for_dim<64>(stream, a, sink, out);
    case 128:
      return launch_for_dim<128>(stream, a, sink, out);
    case 256:
      return launch_for_dim<256>(stream, a, sink, out);
    case 512:
      return launch_for_dim<512>(stream, a, sink, out);
    default:
      return false;
  }
}

}  // namespace flashdesk::cuda
