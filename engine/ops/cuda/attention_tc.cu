// Sparse attention of prefill-sized calls on the tensor cores (docs/numerics.md "Sparse
// attention"; the CUDA-core kernels of attention.cu take decode). One CTA per query walks its key
// list in the definition's 64-slot blocks with every head at once: all heads share the query's
// keys (one KV head), so a block's keys are decoded into shared memory once and the two products
// are matrix products on the tensor cores (mma.cuh):
//   1. S = Q K^T for the block: heads (in 16-row groups) by 64 slots, the head dim as k; warp w
//      takes slots 8w..8w+7 for every head group; S * scale, -inf for empty slots.
//   2. The definition's block step per head (a warp per head): m' = max(m, max s), c = exp(m - m'),
//      p = exp(s - m'), den = den * c + sum p, P = bf16(p).
//   3. acc = acc * c + P V: heads by the head dim, the 64 slots as k; warp w takes dims
//      [w D / 8, (w + 1) D / 8) of every head.
// At the end den += exp(sink - m) and out = bf16(acc / den) (0 where no slot had a key). Q is BF16
// (the definition's q is a BF16 value), keys are exact in BF16 (FP8 x UE8M0, FP4 x E4M3), P is
// rounded to BF16 by the definition: every product is the definition's, and only the order and
// the tensor cores' rounding of the FP32 sums differ (the same class of difference as the
// CUDA-core kernels' split sums).
#include "engine/ops/cuda/attention_args.cuh"
#include "engine/ops/cuda/attention_keys.cuh"
#include "engine/ops/cuda/mma.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxHeadGroups = 4;  // 64 heads
constexpr int kKeyPad = 8;         // BF16 values after each staged row: rows 4 banks apart
constexpr int kScorePad = 4;       // floats after each score row

// Shared memory of a CTA, in this order: Q [16 HG][D + pad] bf16, keys [64][D + pad] bf16,
// P [16 HG][64 + pad] bf16, S [16 HG][64 + pad] f32, then per head m, den, c (f32).
struct Smem {
  int q_stride, key_stride, p_stride, s_stride;
  size_t q_off, key_off, p_off, s_off, m_off, den_off, c_off, bytes;
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
  l.p_off = l.key_off + static_cast<size_t>(kBlockSlots * l.key_stride) * 2;
  l.s_off = l.p_off + static_cast<size_t>(rows * l.p_stride) * 2;
  l.m_off = l.s_off + static_cast<size_t>(rows * l.s_stride) * 4;
  l.den_off = l.m_off + static_cast<size_t>(rows) * 4;
  l.c_off = l.den_off + static_cast<size_t>(rows) * 4;
  l.bytes = l.c_off + static_cast<size_t>(rows) * 4;
  return l;
}

// grid (n): query blockIdx.x, HG groups of 16 heads, head dim D.
template <int HG, int D>
__global__ void __launch_bounds__(kThreads)
    attn_tc_kernel(AttnArgs a, const float* sink, float* out) {
  FD_GRID_PROLOGUE();
  constexpr int kRows = 16 * HG, kDimTiles = D / 8 / kWarps;  // 8-dim tiles of a warp's dims
  const Smem l = smem_layout(HG, D);
  FD_DYNAMIC_SMEM(unsigned char, smem);
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem + l.q_off);
  uint16_t* keys = reinterpret_cast<uint16_t*>(smem + l.key_off);
  uint16_t* ps = reinterpret_cast<uint16_t*>(smem + l.p_off);
  float* ss = reinterpret_cast<float*>(smem + l.s_off);
  float* m_run = reinterpret_cast<float*>(smem + l.m_off);
  float* den = reinterpret_cast<float*>(smem + l.den_off);
  float* corr = reinterpret_cast<float*>(smem + l.c_off);
  __shared__ const uint8_t* rows[kBlockSlots];
  __shared__ int fp4s[kBlockSlots];
  __shared__ int any[2][2];

  const int64_t t = blockIdx.x;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, c = 2 * (lane & 3);
  for (int i = static_cast<int>(threadIdx.x); i < kRows * D; i += kThreads) {
    const int h = i / D, d = i % D;
    qs[h * l.q_stride + d] =
        h < a.heads ? f32_to_bf16_bits(a.q[(t * a.heads + h) * D + d]) : uint16_t{0};
  }
  for (int h = static_cast<int>(threadIdx.x); h < kRows; h += kThreads) {
    m_run[h] = kMinit;
    den[h] = 0.0f;
  }
  float acc[HG][kDimTiles][4];
  FD_UNROLL
  for (int hg = 0; hg < HG; ++hg) FD_UNROLL
  for (int nt = 0; nt < kDimTiles; ++nt) FD_UNROLL
  for (int i = 0; i < 4; ++i) acc[hg][nt][i] = 0.0f;

  for (int64_t b = 0; b < a.blocks; ++b) {
    // (The first call's barrier also publishes qs, m and den.) No key: the block changes nothing.
    if (!stage_block_keys<D, kThreads, 8>(a, t, b, keys, l.key_stride, rows, fp4s, any)) continue;
    // 1. S for slots 8 warp .. 8 warp + 7.
    {
      float s[HG][4];
      FD_UNROLL
      for (int hg = 0; hg < HG; ++hg) FD_UNROLL
      for (int i = 0; i < 4; ++i) s[hg][i] = 0.0f;
      const uint16_t* krow = keys + (8 * warp + g) * l.key_stride + c;
      FD_UNROLL
      for (int k0 = 0; k0 < D; k0 += 16) {
        const uint32_t bf[2] = {*reinterpret_cast<const uint32_t*>(krow + k0),
                                *reinterpret_cast<const uint32_t*>(krow + k0 + 8)};
        FD_UNROLL
        for (int hg = 0; hg < HG; ++hg) {
          const uint16_t* q0 = qs + (16 * hg + g) * l.q_stride + k0 + c;
          const uint16_t* q8 = q0 + 8 * l.q_stride;
          const uint32_t af[4] = {*reinterpret_cast<const uint32_t*>(q0),
                                  *reinterpret_cast<const uint32_t*>(q8),
                                  *reinterpret_cast<const uint32_t*>(q0 + 8),
                                  *reinterpret_cast<const uint32_t*>(q8 + 8)};
          // Each mma sums only its own 16 products (the tensor cores truncate as they
          // accumulate: a running sum kept inside them drifted a bounded-mode golden row by
          // 2.6e-2), and the FP32 additions of the parts are rounded to nearest.
          float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma_bf16_16816(part, af, bf);
          FD_UNROLL
          for (int i = 0; i < 4; ++i) s[hg][i] += part[i];
        }
      }
      const int slot = 8 * warp + c;
      const bool v0 = rows[slot] != nullptr, v1 = rows[slot + 1] != nullptr;
      FD_UNROLL
      for (int hg = 0; hg < HG; ++hg) {
        float* r0 = ss + (16 * hg + g) * l.s_stride + slot;
        float* r8 = r0 + 8 * l.s_stride;
        r0[0] = v0 ? s[hg][0] * a.softmax_scale : -INFINITY;
        r0[1] = v1 ? s[hg][1] * a.softmax_scale : -INFINITY;
        r8[0] = v0 ? s[hg][2] * a.softmax_scale : -INFINITY;
        r8[1] = v1 ? s[hg][3] * a.softmax_scale : -INFINITY;
      }
    }
    __syncthreads();
    // 2. The block step of each head.
    for (int h = warp; h < a.heads; h += kWarps) {
      const float s0 = ss[h * l.s_stride + lane], s1 = ss[h * l.s_stride + lane + 32];
      const float m = m_run[h], m_new = fmaxf(m, warp_max(fmaxf(s0, s1)));
      const float p0 = expf(s0 - m_new), p1 = expf(s1 - m_new);
      const float sum = warp_sum(p0 + p1);
      ps[h * l.p_stride + lane] = f32_to_bf16_bits(p0);
      ps[h * l.p_stride + lane + 32] = f32_to_bf16_bits(p1);
      __syncwarp();
      if (lane == 0) {
        const float cf = expf(m - m_new);
        corr[h] = cf;
        den[h] = den[h] * cf + sum;
        m_run[h] = m_new;
      }
    }
    __syncthreads();
    // 3. acc = acc * c + P V over this warp's dims.
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
    FD_UNROLL
    for (int k0 = 0; k0 < kBlockSlots; k0 += 16) {
      uint32_t af[HG][4];
      FD_UNROLL
      for (int hg = 0; hg < HG; ++hg) {
        const uint16_t* p0 = ps + (16 * hg + g) * l.p_stride + k0 + c;
        const uint16_t* p8 = p0 + 8 * l.p_stride;
        af[hg][0] = *reinterpret_cast<const uint32_t*>(p0);
        af[hg][1] = *reinterpret_cast<const uint32_t*>(p8);
        af[hg][2] = *reinterpret_cast<const uint32_t*>(p0 + 8);
        af[hg][3] = *reinterpret_cast<const uint32_t*>(p8 + 8);
      }
      const uint16_t* v = keys + (k0 + c) * l.key_stride + warp * (D / kWarps) + g;
      FD_UNROLL
      for (int nt = 0; nt < kDimTiles; ++nt) {
        const uint16_t* vn = v + 8 * nt;
        const uint32_t bf[2] = {pack_bf16_pair(vn[0], vn[l.key_stride]),
                                pack_bf16_pair(vn[8 * l.key_stride], vn[9 * l.key_stride])};
        FD_UNROLL
        for (int hg = 0; hg < HG; ++hg) {
          float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // as for S: 16 products an mma
          mma_bf16_16816(part, af[hg], bf);
          FD_UNROLL
          for (int i = 0; i < 4; ++i) acc[hg][nt][i] += part[i];
        }
      }
    }
    __syncthreads();  // keys, S and P are the next block's
  }
  // out = bf16(acc / (den + exp(sink - m))), 0 where no slot had a key.
  FD_UNROLL
  for (int hg = 0; hg < HG; ++hg) {
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int h = 16 * hg + g + 8 * half;
      if (h >= a.heads) continue;
      const float m = m_run[h], total = den[h] + expf(sink[h] - m);
      float* o = out + (t * a.heads + h) * D + warp * (D / kWarps) + c;
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
void launch_tc(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out) {
  const size_t bytes = smem_layout(HG, D).bytes;
  allow_dynamic_smem<attn_tc_kernel<HG, D>>(bytes);
  FD_LAUNCH((attn_tc_kernel<HG, D>), dim3(static_cast<unsigned>(a.n)), dim3(kThreads), bytes,
            stream, a, sink, out);
}

template <int D>
bool launch_for_dim(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out) {
  switch ((a.heads + 15) / 16) {
    case 1:
      launch_tc<1, D>(stream, a, sink, out);
      return true;
    case 2:
      launch_tc<2, D>(stream, a, sink, out);
      return true;
    case 3:
    case 4:
      launch_tc<4, D>(stream, a, sink, out);
      return true;
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
