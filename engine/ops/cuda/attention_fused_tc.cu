// Sparse attention of decode-sized calls in one kernel: the split path's three launches
// (attention_split_tc.cu's scores and block kernels, attention.cu's combine) as the steps of one
// CTA a (64-slot block, 16 heads, query), with the combine in the last of a query's head group to
// finish. Why: at one query those three kernels' chains of dependent loads, reductions and
// writes took about 19 µs of a decode layer on an H100 (queued timelines, thirty-fifth session),
// for 8 (window-only) to 40 (Reuse, Full, Reindex) MFLOP; here the chain runs once.
//
// A CTA stages its block's keys and the query's 16 heads as BF16, computes S for its 64 slots,
// publishes the block's maxima, and waits for the maxima of the query's earlier blocks (a flag a
// block): the definition's p takes the running maximum after its block (docs/numerics.md "Sparse
// attention"). Every CTA of the grid must therefore be resident at once: the backend takes this
// kernel only for grids of at most one CTA a multiprocessor (decode's one to three queries), and
// on the emulator, whose blocks run one after another in index order, the earlier blocks (lower x)
// have finished by the time a block waits. Then p, the block's sum of p and bf16(p) V over the
// head dim go out as the split path's parts, and the query's head group's last CTA (an arrival
// count) combines them, adds the sink, rounds to BF16 and, where asked, undoes RoPE.
//
// The values are the split path's to the bit: the same BF16 keys and queries, the same mma
// fragments with each product's 16 sums fresh and added in the same order (S over four quarters
// of the head dim, summed in order; P V over the block's slots in order), the same maxima, warp
// sums and exponentials, and the combine's sums over the blocks in order with the sink last
// (CudaAttentionTest holds the bits to the split path's).
#include "engine/ops/cuda/attention_keys.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kWarps = 16;
constexpr int kThreads = 32 * kWarps;
constexpr int kHeadsPerCta = 16;  // one mma row tile; a warp a head in the block step
constexpr int kPad = 8;           // BF16 values after each staged row: rows 4 banks apart
constexpr int kKParts = 4;        // S's head-dim quarters, summed in order (the split path's)
constexpr int kMaxFusedBlocks = 64;
static_assert(kWarps == kHeadsPerCta, "the block step takes a warp a head");

template <int D>
struct FusedLayout {
  static constexpr int kStride = D + kPad, kSumStride = kBlockSlots + 4,
                       kPStride = kBlockSlots + kPad;
  static constexpr size_t kKeys = 0;
  static constexpr size_t kQ = kKeys + size_t{kBlockSlots} * kStride * 2;
  static constexpr size_t kSums = kQ + size_t{kHeadsPerCta} * kStride * 2;
  static constexpr size_t kScores = kSums + size_t{kKParts} * kHeadsPerCta * kSumStride * 4;
  static constexpr size_t kP = kScores + size_t{kHeadsPerCta} * kBlockSlots * 4;
  static constexpr size_t kScale = kP + size_t{kHeadsPerCta} * kPStride * 2;  // [head][block]
  static constexpr size_t kDenom = kScale + size_t{kHeadsPerCta} * kMaxFusedBlocks * 4;
  static constexpr size_t kRows = kDenom + size_t{kHeadsPerCta} * 4;
  static constexpr size_t kFp4 = kRows + size_t{kBlockSlots} * sizeof(const uint8_t*);
  static constexpr size_t kLast = kFp4 + size_t{kBlockSlots} * 4;
  static constexpr size_t kBytes = kLast + 16;
  static_assert(kBytes <= 227 * 1024, "a CTA's shared memory");
};

// S for the block's 64 slots and the CTA's 16 heads into scores[head][slot] (times the scale,
// -inf for empty slots): warp tasks (8-slot n tile, head-dim quarter, score_part), the quarters
// summed in order.
template <int D>
__device__ void block_scores(const AttnArgs& a, uint8_t* smem) {
  using L = FusedLayout<D>;
  constexpr int kStride = L::kStride, kKPart = D / kKParts;
  static_assert(kKPart % 16 == 0, "whole k steps a quarter");
  const uint16_t* const keys = reinterpret_cast<const uint16_t*>(smem + L::kKeys);
  const uint16_t* const qs = reinterpret_cast<const uint16_t*>(smem + L::kQ);
  float* const sums = reinterpret_cast<float*>(smem + L::kSums);
  float* const scores = reinterpret_cast<float*>(smem + L::kScores);
  const uint8_t* const* const rows = reinterpret_cast<const uint8_t* const*>(smem + L::kRows);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, c = 2 * (lane & 3);
  for (int task = warp; task < (kBlockSlots / 8) * kKParts; task += kWarps) {
    const int nt = task / kKParts, kp = task % kKParts;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint16_t* krow = keys + (8 * nt + g) * kStride + kp * kKPart + c;
    const uint16_t* q0 = qs + g * kStride + kp * kKPart + c;
    score_part<kKPart>(krow, q0, q0 + 8 * kStride, s);
    float* const sq = sums + kp * kHeadsPerCta * L::kSumStride;
    sq[g * L::kSumStride + 8 * nt + c] = s[0];
    sq[g * L::kSumStride + 8 * nt + c + 1] = s[1];
    sq[(g + 8) * L::kSumStride + 8 * nt + c] = s[2];
    sq[(g + 8) * L::kSumStride + 8 * nt + c + 1] = s[3];
  }
  __syncthreads();
  for (int i = tid; i < kHeadsPerCta * kBlockSlots; i += kThreads) {
    const int hr = i / kBlockSlots, slot = i % kBlockSlots;
    const auto part = [&](int kp) { return sums[(kp * kHeadsPerCta + hr) * L::kSumStride + slot]; };
    const float dot = ((part(0) + part(1)) + part(2)) + part(3);
    scores[i] = rows[slot] != nullptr ? dot * a.softmax_scale : -INFINITY;
  }
}

// The block's bf16(p) V over the head dim (value_step, in slot order) into the parts: a warp an
// 8-dim n tile.
template <int D>
__device__ void block_values(const AttnArgs& a, const uint8_t* smem, bool any, int64_t part,
                             int64_t h0, float* part_acc) {
  using L = FusedLayout<D>;
  constexpr int kStride = L::kStride;
  const uint16_t* const keys = reinterpret_cast<const uint16_t*>(smem + L::kKeys);
  const uint16_t* const ps = reinterpret_cast<const uint16_t*>(smem + L::kP);
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2, c = 2 * (lane & 3);
  for (int nt = warp; nt < D / 8; nt += kWarps) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (any) {  // else p is 0 and the keys were never staged: the split path's 0
      FD_UNROLL
      for (int k0 = 0; k0 < kBlockSlots; k0 += 16) {
        const uint16_t* p0 = ps + g * L::kPStride + k0 + c;
        uint32_t af[4];
        p_fragment(p0, p0 + 8 * L::kPStride, af);
        value_step(af, keys + (k0 + c) * kStride + 8 * nt + g, kStride, acc);
      }
    }
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int64_t h = h0 + g + 8 * half;
      if (h < a.heads)
        __stcg(reinterpret_cast<float2*>(part_acc + (part + h) * D + 8 * nt + c),
               float2{acc[2 * half], acc[2 * half + 1]});
    }
  }
}

// The last CTA of a query's head group: the blocks' parts combined as attention.cu's combine
// kernel does (the sums scaled to the last running maximum, in block order, the sink last), out
// rounded to BF16, then RoPE undone where asked.
template <int D>
__device__ void combine_parts(const AttnArgs& a, const FusedScratch& s, const float* sink,
                              uint8_t* smem, int64_t t, int64_t h0, float* out) {
  using L = FusedLayout<D>;
  float* const scale = reinterpret_cast<float*>(smem + L::kScale);  // [head][block]
  float* const denom = reinterpret_cast<float*>(smem + L::kDenom);
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t blocks = a.blocks;
  const auto at = [&](int64_t b, int64_t h) { return (t * blocks + b) * a.heads + h; };
  for (int i = tid; i < kHeadsPerCta * blocks; i += kThreads) {
    const int hr = i / static_cast<int>(blocks);
    const int64_t b = i % blocks, h = h0 + hr;
    if (h < a.heads)
      scale[hr * kMaxFusedBlocks + b] =
          expf(__ldcg(s.part_m + at(b, h)) - __ldcg(s.part_m + at(blocks - 1, h)));
  }
  __syncthreads();
  if (tid < kHeadsPerCta && h0 + tid < a.heads) {
    const int64_t h = h0 + tid;
    float sum = 0.0f;
    for (int64_t b = 0; b < blocks; ++b)
      sum += __ldcg(s.part_s + at(b, h)) * scale[tid * kMaxFusedBlocks + b];
    denom[tid] = sum + expf(sink[h] - __ldcg(s.part_m + at(blocks - 1, h)));
  }
  __syncthreads();
  for (int i = tid; i < kHeadsPerCta * D; i += kThreads) {
    const int hr = i / D, d = i % D;
    const int64_t h = h0 + hr;
    if (h >= a.heads) continue;
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b)
      acc += __ldcg(s.part_acc + at(b, h) * D + d) * scale[hr * kMaxFusedBlocks + b];
    const bool none = __ldcg(s.part_m + at(blocks - 1, h)) <= kMinit;
    out[(t * a.heads + h) * D + d] = none ? 0.0f : round_bf16(acc / denom[hr]);
  }
  if (a.unrotate_freq == nullptr) return;
  __syncthreads();  // the CTA's outputs written (and visible to it) before the pairs
  for (int i = tid; i < kHeadsPerCta * a.rope_pairs; i += kThreads) {
    const int64_t h = h0 + i / a.rope_pairs, p = i % a.rope_pairs;
    if (h >= a.heads) continue;
    float* rot = out + (t * a.heads + h) * D + D - 2 * a.rope_pairs;
    rope_pair(rot + 2 * p, a.positions[t], a.unrotate_freq[p], -1.0f);
  }
}

// grid (blocks, head groups of 16, n).
template <int D>
__global__ void __launch_bounds__(kThreads)
    attn_fused_kernel(AttnArgs a, const float* sink, float* out, FusedScratch s) {
  using L = FusedLayout<D>;
  constexpr int kStride = L::kStride;
  FD_GRID_PROLOGUE();
  FD_DYNAMIC_SMEM(uint8_t, smem);
  const int64_t b = blockIdx.x, t = blockIdx.z;
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * kHeadsPerCta;
  const int64_t group = static_cast<int64_t>(t) * gridDim.y + blockIdx.y;
  unsigned* const flags =
      s.counters + static_cast<int64_t>(gridDim.y) * gridDim.z + group * a.blocks;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  uint16_t* const qs = reinterpret_cast<uint16_t*>(smem + L::kQ);
  const float* const scores = reinterpret_cast<const float*>(smem + L::kScores);
  uint16_t* const ps = reinterpret_cast<uint16_t*>(smem + L::kP);

  // Q of the 16 heads as BF16 (published by the staging's barrier).
  stage_query<D, kHeadsPerCta, kThreads>(a, t, h0, qs, kStride);
  const bool any = stage_key_part<kBlockSlots, D, D, kThreads, kPad>(
      a, t, b * kBlockSlots, 0, reinterpret_cast<uint16_t*>(smem + L::kKeys),
      reinterpret_cast<const uint8_t**>(smem + L::kRows), reinterpret_cast<int*>(smem + L::kFp4));
  if (any) {
    block_scores<D>(a, smem);
  } else {
    for (int i = tid; i < kHeadsPerCta * kBlockSlots; i += kThreads)
      reinterpret_cast<float*>(smem + L::kScores)[i] = -INFINITY;
  }
  __syncthreads();

  // The block's maxima out (warp w: head w), then the flag once every warp's are.
  const int64_t h = h0 + warp;
  const float* const sr = scores + warp * kBlockSlots;
  if (h < a.heads) {
    const float m = warp_max(fmaxf(sr[lane], sr[lane + 32]));
    if (lane == 0) __stcg(s.block_max + (t * a.blocks + b) * a.heads + h, m);
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) atomicAdd(flags + b, 1u);
  // The earlier blocks' maxima: thread j waits for block j's flag.
  if (tid < b) {
    while (*reinterpret_cast<volatile unsigned*>(flags + tid) == 0u) {
#ifndef FLASHDESK_CUDA_EMU
      __nanosleep(32);
#endif
    }
    __threadfence();
  }
  __syncthreads();

  // Warp w, head w: the running maximum after this block, p and the block's sum of p (the split
  // block kernel's).
  float p0 = 0.0f, p1 = 0.0f;
  const int64_t part = (t * a.blocks + b) * a.heads;
  if (h < a.heads) {
    float m = kMinit;
    for (int64_t j = lane; j <= b; j += 32)
      m = fmaxf(m, __ldcg(s.block_max + (t * a.blocks + j) * a.heads + h));
    m = warp_max(m);
    p0 = expf(sr[lane] - m);
    p1 = expf(sr[lane + 32] - m);
    const float sum = warp_sum(p0 + p1);
    if (lane == 0) {
      __stcg(s.part_m + part + h, m);
      __stcg(s.part_s + part + h, sum);
    }
  }
  ps[warp * L::kPStride + lane] = f32_to_bf16_bits(p0);
  ps[warp * L::kPStride + lane + 32] = f32_to_bf16_bits(p1);
  __syncthreads();
  block_values<D>(a, smem, any, part, h0, s.part_acc);

  // The head group's last CTA combines (and sets the flags and its count back to zero).
  __threadfence();
  __syncthreads();
  int* const last = reinterpret_cast<int*>(smem + L::kLast);
  if (warp == 0) {
    const bool mine = warp_arrives_last(s.counters + group, static_cast<unsigned>(a.blocks));
    if (lane == 0) *last = mine ? 1 : 0;
  }
  __syncthreads();
  if (*last == 0) return;
  for (int64_t j = tid; j < a.blocks; j += kThreads) flags[j] = 0u;
  combine_parts<D>(a, s, sink, smem, t, h0, out);
}

template <int D>
void launch_fused(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out,
                  const FusedScratch& s) {
  constexpr size_t kBytes = FusedLayout<D>::kBytes;
  allow_dynamic_smem<attn_fused_kernel<D>>(kBytes);
  const unsigned head_groups = static_cast<unsigned>((a.heads + kHeadsPerCta - 1) / kHeadsPerCta);
  FD_LAUNCH(attn_fused_kernel<D>,
            dim3(static_cast<unsigned>(a.blocks), head_groups, static_cast<unsigned>(a.n)),
            dim3(kThreads), kBytes, stream, a, sink, out, s);
}

}  // namespace

bool attention_fused_takes(const AttnArgs& a, int64_t n, int64_t resident_ctas) {
  const int64_t groups = (a.heads + kHeadsPerCta - 1) / kHeadsPerCta;
  const bool dim = a.dim == 64 || a.dim == 128 || a.dim == 256 || a.dim == 512;
  return dim && n > 0 && a.heads > 0 && a.blocks >= 1 && a.blocks <= kMaxFusedBlocks &&
         a.blocks * groups <= resident_ctas / n;
}

int64_t attention_fused_counters(const AttnArgs& a) {
  return ((a.heads + kHeadsPerCta - 1) / kHeadsPerCta) * a.n * (1 + a.blocks);
}

void attention_fused_on_tensor_cores(cudaStream_t stream, const AttnArgs& a, const float* sink,
                                     float* out, const FusedScratch& s) {
  switch (a.dim) {
    case 64:
      return launch_fused<64>(stream, a, sink, out, s);
    case 128:
      return launch_fused<128>(stream, a, sink, out, s);
    case 256:
      return launch_fused<256>(stream, a, sink, out, s);
    case 512:
      return launch_fused<512>(stream, a, sink, out, s);
    default:
      FD_CHECK(false, "attention_fused_on_tensor_cores: a head dim it does not take");
  }
}

}  // namespace flashdesk::cuda
