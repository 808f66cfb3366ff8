// Sparse attention of decode-sized calls on the tensor cores, split over the key list
// (docs/numerics.md "Sparse attention"; attention.cu combines the parts). A decode step has one to
// a few queries of 64 heads sharing one KV head and ten 64-slot blocks (the window's 128 slots
// and the 512 top-k columns), so each kernel spreads a query over many small CTAs, each staging
// only its part of the keys as BF16 and running its products as matrix products (mma.cuh):
//   1. scores, a CTA per (query, 16-slot quarter of a block, 16 heads): S = Q K^T over the head
//      dim (warps split the dim in four, summed in order), times the scale, -inf for empty slots,
//      and each head's maximum over the quarter;
//   2. block, a CTA per (query, block, 16 heads, quarter of the head dim): M_b = the running
//      maximum after block b (over the quarter maxima of blocks <= b, from kMinit), p = exp(s -
//      M_b), the block's sum of p, and A_b = bf16(p) V over the CTA's dims.
// Each p is the one the sequential definition computes (its running maximum after the block), so
// only the FP32 summation order differs from it, as in the other kernels. A CTA per whole block
// and 16 heads (staging all 64 x 512 keys) took 26-30 µs a kernel on the H200: its decoding
// chain, not the products, on ten CTAs.
#include "engine/ops/cuda/attention_keys.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kHeadsPerCta = 16;                              // one mma row tile
constexpr int kQuarterSlots = kBlockSlots / kSplitSlotParts;  // slots of a scores CTA: 2 n tiles
constexpr int kDimParts = 4;                                  // head-dim parts of a block CTA
constexpr int kPad = 8;  // BF16 values after each staged row: rows 4 banks apart

// Query t's heads h0 .. h0 + 15 as BF16 rows of D + kPad values (the definition's q is a BF16
// value: exact; rows past the heads zero), four values a thread step; the caller's next barrier
// publishes them.
template <int D>
__device__ void stage_query(const AttnArgs& a, int64_t t, int64_t h0, uint16_t* qs) {
  constexpr int stride = D + kPad;
  for (int i = static_cast<int>(threadIdx.x); i < kHeadsPerCta * D / 4; i += kThreads) {
    const int h = i / (D / 4), d = i % (D / 4) * 4;
    uint2 w{0u, 0u};
    if (h0 + h < a.heads) {
      const float4 v = load_aligned<float4>(a.q + (t * a.heads + h0 + h) * D + d);
      w.x = pack_bf16_pair(f32_to_bf16_bits(v.x), f32_to_bf16_bits(v.y));
      w.y = pack_bf16_pair(f32_to_bf16_bits(v.z), f32_to_bf16_bits(v.w));
    }
    *reinterpret_cast<uint2*>(qs + h * stride + d) = w;
  }
}

// S for an 8-slot tile over kKPart values of the head dim from krow (this lane's key row) and
// q0 / q8 (this lane's rows of the heads' query): each mma sums only its own 16 products, and
// those sums are added to s in FP32 rounded to nearest (as attention_tc.cu: a running sum inside
// the tensor cores truncates).
template <int kKPart>
__device__ __forceinline__ void score_part(const uint16_t* krow, const uint16_t* q0,
                                           const uint16_t* q8, float (&s)[4]) {
  FD_UNROLL
  for (int k0 = 0; k0 < kKPart; k0 += 16) {
    const uint32_t bf[2] = {*reinterpret_cast<const uint32_t*>(krow + k0),
                            *reinterpret_cast<const uint32_t*>(krow + k0 + 8)};
    const uint32_t af[4] = {*reinterpret_cast<const uint32_t*>(q0 + k0),
                            *reinterpret_cast<const uint32_t*>(q8 + k0),
                            *reinterpret_cast<const uint32_t*>(q0 + k0 + 8),
                            *reinterpret_cast<const uint32_t*>(q8 + k0 + 8)};
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_bf16_16816(part, af, bf);
    FD_UNROLL
    for (int i = 0; i < 4; ++i) s[i] += part[i];
  }
}

// The A fragment of a k16 step of bf16(p) V: this lane's P values at p0 (head g) and p8 (g + 8).
__device__ __forceinline__ void p_fragment(const uint16_t* p0, const uint16_t* p8,
                                           uint32_t (&af)[4]) {
  af[0] = *reinterpret_cast<const uint32_t*>(p0);
  af[1] = *reinterpret_cast<const uint32_t*>(p8);
  af[2] = *reinterpret_cast<const uint32_t*>(p0 + 8);
  af[3] = *reinterpret_cast<const uint32_t*>(p8 + 8);
}

// One k16 step of bf16(p) V for an 8-dim tile: B from the key rows at vn (rows `stride` values
// apart), the step's 16 products summed fresh and added to acc (as for S).
__device__ __forceinline__ void value_step(const uint32_t (&af)[4], const uint16_t* vn, int stride,
                                           float (&acc)[4]) {
  const uint32_t bf[2] = {pack_bf16_pair(vn[0], vn[stride]),
                          pack_bf16_pair(vn[8 * stride], vn[9 * stride])};
  float prod[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mma_bf16_16816(prod, af, bf);
  FD_UNROLL
  for (int i = 0; i < 4; ++i) acc[i] += prod[i];
}

// grid (n, 4 blocks, head groups of 16): scores[t][h][16 quarter + slot] and
// quarter_max[t][quarter][h] for quarter blockIdx.y (of 64-slot block blockIdx.y / 4).
template <int D>
__global__ void __launch_bounds__(kThreads)
    attn_split_scores_kernel(AttnArgs a, float* scores, float* quarter_max) {
  FD_GRID_PROLOGUE();
  constexpr int kStride = D + kPad, kKPart = D / 4;  // warps 2 j and 2 j + 1 take k part j
  constexpr int kSumStride = kQuarterSlots + 4;
  static_assert(kKPart % 16 == 0, "whole k steps a warp");
  __shared__ __align__(16) uint16_t keys[kQuarterSlots * kStride];
  __shared__ __align__(16) uint16_t qs[kHeadsPerCta * kStride];
  __shared__ float sums[4][kHeadsPerCta][kSumStride];  // per k part, then the scores
  __shared__ const uint8_t* rows[kQuarterSlots];
  __shared__ int fp4s[kQuarterSlots];
  const int64_t t = blockIdx.x, quarter = blockIdx.y, first = quarter * kQuarterSlots;
  const int64_t h0 = static_cast<int64_t>(blockIdx.z) * kHeadsPerCta;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, c = 2 * (lane & 3);
  const int64_t list = a.blocks * kBlockSlots;
  stage_query<D>(a, t, h0, qs);  // published by the staging's barrier
  const int hr = static_cast<int>(threadIdx.x) / kQuarterSlots,
            slot = static_cast<int>(threadIdx.x) % kQuarterSlots;  // this thread's score
  if (!stage_key_part<kQuarterSlots, D, D, kThreads, kPad>(a, t, first, 0, keys, rows, fp4s)) {
    // No key in the quarter: every score -inf.
    if (h0 + hr < a.heads) scores[(t * a.heads + h0 + hr) * list + first + slot] = -INFINITY;
    if (threadIdx.x < kHeadsPerCta && h0 + threadIdx.x < a.heads)
      quarter_max[(t * a.blocks * kSplitSlotParts + quarter) * a.heads + h0 + threadIdx.x] =
          -INFINITY;
    return;
  }
  // Warp w: slots 8 (w % 2) .. + 7 over k part w / 2.
  {
    const int nt = warp & 1, kp = warp >> 1;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint16_t* krow = keys + (8 * nt + g) * kStride + kp * kKPart + c;
    const uint16_t* q0 = qs + g * kStride + kp * kKPart + c;
    score_part<kKPart>(krow, q0, q0 + 8 * kStride, s);
    sums[kp][g][8 * nt + c] = s[0];
    sums[kp][g][8 * nt + c + 1] = s[1];
    sums[kp][g + 8][8 * nt + c] = s[2];
    sums[kp][g + 8][8 * nt + c + 1] = s[3];
  }
  __syncthreads();
  // Thread (head hr, slot): the k parts summed in order, times the scale.
  const float dot =
      ((sums[0][hr][slot] + sums[1][hr][slot]) + sums[2][hr][slot]) + sums[3][hr][slot];
  const float score = rows[slot] != nullptr ? dot * a.softmax_scale : -INFINITY;
  if (h0 + hr < a.heads) scores[(t * a.heads + h0 + hr) * list + first + slot] = score;
  // The head's maximum over the quarter: its 16 slots are 16 consecutive lanes.
  float m = score;
  FD_UNROLL
  for (int o = kQuarterSlots / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
  if (slot == 0 && h0 + hr < a.heads)
    quarter_max[(t * a.blocks * kSplitSlotParts + quarter) * a.heads + h0 + hr] = m;
}

// grid (n, blocks, head groups of 16 x 4 dim parts): part_m[t][b][h] = M_b, part_s[t][b][h] = the
// block's sum of p (dim part 0 writes them), part_acc[t][b][h][d] = the block's sum of bf16(p) v
// over the CTA's dims.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attn_split_block_kernel(AttnArgs a, const float* scores, const float* quarter_max,
                            float* part_m, float* part_s, float* part_acc) {
  FD_GRID_PROLOGUE();
  constexpr int kDims = D / kDimParts, kStride = kDims + kPad, kPStride = kBlockSlots + kPad;
  constexpr int kTiles = kDims / 8;  // 8-dim n tiles of the CTA
  constexpr int kTilesPerWarp = (kTiles + kWarps - 1) / kWarps;
  __shared__ __align__(16) uint16_t keys[kBlockSlots * kStride];
  __shared__ __align__(16) uint16_t ps[kHeadsPerCta * kPStride];
  __shared__ const uint8_t* rows[kBlockSlots];
  __shared__ int fp4s[kBlockSlots];
  const int64_t t = blockIdx.x, b = blockIdx.y;
  const int64_t h0 = static_cast<int64_t>(blockIdx.z / kDimParts) * kHeadsPerCta;
  const int dim_part = static_cast<int>(blockIdx.z % kDimParts), d_lo = dim_part * kDims;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, c = 2 * (lane & 3);
  const int64_t list = a.blocks * kBlockSlots, part = (t * a.blocks + b) * a.heads;
  // A warp per head: M_b, p, the block's sum; published by the staging's barrier.
  for (int hr = warp; hr < kHeadsPerCta; hr += kWarps) {
    const int64_t h = h0 + hr;
    float p0 = 0.0f, p1 = 0.0f;
    if (h < a.heads) {
      float m = kMinit;
      for (int64_t j = lane; j < (b + 1) * kSplitSlotParts; j += 32)
        m = fmaxf(m, quarter_max[(t * a.blocks * kSplitSlotParts + j) * a.heads + h]);
      m = warp_max(m);
      const float* sr = scores + (t * a.heads + h) * list + b * kBlockSlots;
      p0 = expf(sr[lane] - m);
      p1 = expf(sr[lane + 32] - m);
      const float sum = warp_sum(p0 + p1);
      if (lane == 0 && dim_part == 0) {
        part_m[part + h] = m;
        part_s[part + h] = sum;
      }
    }
    ps[hr * kPStride + lane] = f32_to_bf16_bits(p0);
    ps[hr * kPStride + lane + 32] = f32_to_bf16_bits(p1);
  }
  if (!stage_key_part<kBlockSlots, kDims, D, kThreads, kPad>(a, t, b * kBlockSlots, d_lo, keys,
                                                             rows, fp4s)) {
    // No key: p is 0 everywhere, and so is the block's value sum.
    for (int i = static_cast<int>(threadIdx.x); i < kHeadsPerCta * kDims; i += kThreads) {
      const int64_t h = h0 + i / kDims;
      if (h < a.heads) part_acc[(part + h) * D + d_lo + i % kDims] = 0.0f;
    }
    return;
  }
  float acc[kTilesPerWarp][4];
  FD_UNROLL
  for (int j = 0; j < kTilesPerWarp; ++j) FD_UNROLL
  for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
  FD_UNROLL
  for (int k0 = 0; k0 < kBlockSlots; k0 += 16) {
    const uint16_t* p0 = ps + g * kPStride + k0 + c;
    uint32_t af[4];
    p_fragment(p0, p0 + 8 * kPStride, af);
    FD_UNROLL
    for (int j = 0; j < kTilesPerWarp; ++j) {
      const int nt = warp + j * kWarps;
      if (nt >= kTiles) break;
      value_step(af, keys + (k0 + c) * kStride + 8 * nt + g, kStride, acc[j]);
    }
  }
  FD_UNROLL
  for (int j = 0; j < kTilesPerWarp; ++j) {
    const int nt = warp + j * kWarps;
    if (nt >= kTiles) break;
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int64_t h = h0 + g + 8 * half;
      if (h < a.heads)
        *reinterpret_cast<float2*>(part_acc + (part + h) * D + d_lo + 8 * nt + c) =
            float2{acc[j][2 * half], acc[j][2 * half + 1]};
    }
  }
}

template <int D>
void launch_split(cudaStream_t stream, const AttnArgs& a, const SplitScratch& s) {
  const unsigned head_groups = static_cast<unsigned>((a.heads + kHeadsPerCta - 1) / kHeadsPerCta);
  const unsigned n = static_cast<unsigned>(a.n), blocks = static_cast<unsigned>(a.blocks);
  FD_LAUNCH(attn_split_scores_kernel<D>, dim3(n, blocks * kSplitSlotParts, head_groups),
            dim3(kThreads), 0, stream, a, s.scores, s.quarter_max);
  FD_LAUNCH(attn_split_block_kernel<D>, dim3(n, blocks, head_groups * kDimParts), dim3(kThreads), 0,
            stream, a, static_cast<const float*>(s.scores),
            static_cast<const float*>(s.quarter_max), s.part_m, s.part_s, s.part_acc);
}

}  // namespace

bool attention_split_on_tensor_cores(cudaStream_t stream, const AttnArgs& a,
                                     const SplitScratch& s) {
  if (a.n == 0 || a.heads < 1) return false;
  switch (a.dim) {
    case 64:
      launch_split<64>(stream, a, s);
      return true;
    case 128:
      launch_split<128>(stream, a, s);
      return true;
    case 256:
      launch_split<256>(stream, a, s);
      return true;
    case 512:
      launch_split<512>(stream, a, s);
      return true;
    default:
      return false;
  }
}

}  // namespace flashdesk::cuda
