// Sparse attention of decode-sized calls over short key lists (one or two 64-slot blocks: the
// window-only layers' 128 window slots) in one kernel, the three launches of the split path
// (attention_split_tc.cu's scores and block kernels, attention.cu's combine) as the steps of one
// CTA per (query, 16 heads). Why: at one query those three kernels' chains of dependent loads,
// reductions and writes took about 19 µs of a window-only decode layer on an H100 (queued
// timeline, thirty-fifth session), for about 8 MFLOP; here the chain runs once, through shared
// memory, with no parts written to and read back from global memory between launches.
//
// The values are the split path's to the bit: the same BF16 keys and queries, the same mma
// fragments with each product's 16 sums fresh and added in the same order (S over four quarters
// of the head dim, summed in order), the same running maximum a block (kMinit, then every score
// of the blocks so far), the same warp sums of p, and the combine's sums over the blocks in order
// with the sink last; then the output rounded to BF16 and, where asked, RoPE undone on the rope
// pairs (CudaAttentionTest holds the bits to the split path's).
#include "engine/ops/cuda/attention_keys.cuh"

namespace flashdesk::cuda {
namespace {

constexpr int kWarps = 16;
constexpr int kThreads = 32 * kWarps;
constexpr int kHeadsPerCta = 16;  // one mma row tile
constexpr int kPad = 8;           // BF16 values after each staged row: rows 4 banks apart
constexpr int kKParts = 4;        // S's head-dim quarters, summed in order (the split path's)

template <int D, int kBlocks>
struct ShortLayout {
  static constexpr int kSlots = kBlocks * kBlockSlots;
  static constexpr int kStride = D + kPad, kSumStride = kSlots + 4, kPStride = kSlots + kPad;
  static constexpr size_t kKeys = 0;
  static constexpr size_t kQ = kKeys + size_t{kSlots} * kStride * 2;
  static constexpr size_t kSums = kQ + size_t{kHeadsPerCta} * kStride * 2;
  static constexpr size_t kScores = kSums + size_t{kKParts} * kHeadsPerCta * kSumStride * 4;
  static constexpr size_t kP = kScores + size_t{kHeadsPerCta} * kSlots * 4;
  static constexpr size_t kMax = kP + size_t{kHeadsPerCta} * kPStride * 2;
  static constexpr size_t kPSum = kMax + size_t{kBlocks} * kHeadsPerCta * 4;
  static constexpr size_t kRows = kPSum + size_t{kBlocks} * kHeadsPerCta * 4;
  static constexpr size_t kFp4 = kRows + size_t{kSlots} * sizeof(const uint8_t*);
  static constexpr size_t kSink = kFp4 + size_t{kSlots} * 4;
  static constexpr size_t kBytes = kSink + size_t{kHeadsPerCta} * 4;
  static_assert(kBytes <= 227 * 1024, "a CTA's shared memory");
};

// Steps 1-3 of a CTA whose keys are staged (the kernel below): S, the blocks' maxima and p, the
// value sums and the combine, into out.
template <int D, int kBlocks>
__device__ void attend_short(const AttnArgs& a, uint8_t* smem, float* out, int64_t t, int64_t h0) {
  using L = ShortLayout<D, kBlocks>;
  constexpr int kSlots = L::kSlots, kStride = L::kStride, kKPart = D / kKParts;
  static_assert(kKPart % 16 == 0, "whole k steps a quarter");
  const uint16_t* const keys = reinterpret_cast<const uint16_t*>(smem + L::kKeys);
  const uint16_t* const qs = reinterpret_cast<const uint16_t*>(smem + L::kQ);
  float* const sums = reinterpret_cast<float*>(smem + L::kSums);
  float* const scores = reinterpret_cast<float*>(smem + L::kScores);
  uint16_t* const ps = reinterpret_cast<uint16_t*>(smem + L::kP);
  float* const block_max = reinterpret_cast<float*>(smem + L::kMax);  // [b][head]
  float* const block_sum = reinterpret_cast<float*>(smem + L::kPSum);
  const uint8_t* const* const rows = reinterpret_cast<const uint8_t* const*>(smem + L::kRows);
  const float* const sinks = reinterpret_cast<const float*>(smem + L::kSink);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, c = 2 * (lane & 3);

  // 1. S: warp tasks (8-slot n tile, head-dim quarter), each quarter's fresh products added in k
  // order.
  for (int task = warp; task < (kSlots / 8) * kKParts; task += kWarps) {
    const int nt = task / kKParts, kp = task % kKParts;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint16_t* krow = keys + (8 * nt + g) * kStride + kp * kKPart + c;
    const uint16_t* q0 = qs + g * kStride + kp * kKPart + c;
    const uint16_t* q8 = q0 + 8 * kStride;
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
    float* const sq = sums + kp * kHeadsPerCta * L::kSumStride;
    sq[g * L::kSumStride + 8 * nt + c] = s[0];
    sq[g * L::kSumStride + 8 * nt + c + 1] = s[1];
    sq[(g + 8) * L::kSumStride + 8 * nt + c] = s[2];
    sq[(g + 8) * L::kSumStride + 8 * nt + c + 1] = s[3];
  }
  __syncthreads();
  for (int i = tid; i < kHeadsPerCta * kSlots; i += kThreads) {
    const int hr = i / kSlots, slot = i % kSlots;
    const auto part = [&](int kp) { return sums[(kp * kHeadsPerCta + hr) * L::kSumStride + slot]; };
    const float dot = ((part(0) + part(1)) + part(2)) + part(3);
    scores[hr * kSlots + slot] = rows[slot] != nullptr ? dot * a.softmax_scale : -INFINITY;
  }
  __syncthreads();

  // 2. A warp a (head, block): the running maximum after block b, p and the block's sum of p.
  for (int task = warp; task < kHeadsPerCta * kBlocks; task += kWarps) {
    const int hr = task / kBlocks, b = task % kBlocks;
    float p0 = 0.0f, p1 = 0.0f;
    if (h0 + hr < a.heads) {
      float m = kMinit;
      for (int j = lane; j < (b + 1) * kBlockSlots; j += 32) m = fmaxf(m, scores[hr * kSlots + j]);
      m = warp_max(m);
      const float* sr = scores + hr * kSlots + b * kBlockSlots;
      p0 = expf(sr[lane] - m);
      p1 = expf(sr[lane + 32] - m);
      const float sum = warp_sum(p0 + p1);
      if (lane == 0) {
        block_max[b * kHeadsPerCta + hr] = m;
        block_sum[b * kHeadsPerCta + hr] = sum;
      }
    }
    ps[hr * L::kPStride + b * kBlockSlots + lane] = f32_to_bf16_bits(p0);
    ps[hr * L::kPStride + b * kBlockSlots + lane + 32] = f32_to_bf16_bits(p1);
  }
  __syncthreads();

  // 3. A warp an 8-dim n tile: each block's bf16(p) V (fresh products added in slot order), then
  // the combine: the blocks' sums scaled to the last running maximum, in block order, the sink
  // last.
  for (int nt = warp; nt < D / 8; nt += kWarps) {
    float acc[kBlocks][4];
    FD_UNROLL
    for (int b = 0; b < kBlocks; ++b) {
      FD_UNROLL
      for (int i = 0; i < 4; ++i) acc[b][i] = 0.0f;
      FD_UNROLL
      for (int k0 = 0; k0 < kBlockSlots; k0 += 16) {
        const uint16_t* p0 = ps + g * L::kPStride + b * kBlockSlots + k0 + c;
        const uint16_t* p8 = p0 + 8 * L::kPStride;
        const uint32_t af[4] = {
            *reinterpret_cast<const uint32_t*>(p0), *reinterpret_cast<const uint32_t*>(p8),
            *reinterpret_cast<const uint32_t*>(p0 + 8), *reinterpret_cast<const uint32_t*>(p8 + 8)};
        const uint16_t* vn = keys + (b * kBlockSlots + k0 + c) * kStride + 8 * nt + g;
        const uint32_t bf[2] = {pack_bf16_pair(vn[0], vn[kStride]),
                                pack_bf16_pair(vn[8 * kStride], vn[9 * kStride])};
        float prod[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_bf16_16816(prod, af, bf);
        FD_UNROLL
        for (int i = 0; i < 4; ++i) acc[b][i] += prod[i];
      }
    }
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int hr = g + 8 * half;
      const int64_t h = h0 + hr;
      if (h >= a.heads) continue;
      const float m = block_max[(kBlocks - 1) * kHeadsPerCta + hr];
      float denom = 0.0f;
      FD_UNROLL
      for (int b = 0; b < kBlocks; ++b)
        denom += block_sum[b * kHeadsPerCta + hr] * expf(block_max[b * kHeadsPerCta + hr] - m);
      denom += expf(sinks[hr] - m);
      FD_UNROLL
      for (int e = 0; e < 2; ++e) {
        float v = 0.0f;
        FD_UNROLL
        for (int b = 0; b < kBlocks; ++b)
          v += acc[b][2 * half + e] * expf(block_max[b * kHeadsPerCta + hr] - m);
        out[(t * a.heads + h) * D + 8 * nt + c + e] = m <= kMinit ? 0.0f : round_bf16(v / denom);
      }
    }
  }
}

// grid (n, head groups of 16): out[t][h][:] for the group's heads, as the split path writes it.
template <int D, int kBlocks>
__global__ void __launch_bounds__(kThreads)
    attn_short_kernel(AttnArgs a, const float* sink, float* out) {
  using L = ShortLayout<D, kBlocks>;
  constexpr int kSlots = L::kSlots, kStride = L::kStride;
  const int64_t t = blockIdx.x, h0 = static_cast<int64_t>(blockIdx.y) * kHeadsPerCta;
  const int tid = static_cast<int>(threadIdx.x);
  FD_DYNAMIC_SMEM(uint8_t, smem);
  // The group's sinks, a weight nobody writes: loaded before the wait (cuda_compat.cuh), published
  // by the staging's barrier.
  float* const sinks = reinterpret_cast<float*>(smem + L::kSink);
  if (tid < kHeadsPerCta) sinks[tid] = h0 + tid < a.heads ? sink[h0 + tid] : 0.0f;
  FD_GRID_PROLOGUE();
  uint16_t* const keys = reinterpret_cast<uint16_t*>(smem + L::kKeys);
  uint16_t* const qs = reinterpret_cast<uint16_t*>(smem + L::kQ);
  const uint8_t** const rows = reinterpret_cast<const uint8_t**>(smem + L::kRows);
  int* const fp4s = reinterpret_cast<int*>(smem + L::kFp4);

  // Q of the 16 heads as BF16 (published by the staging's barrier).
  for (int i = tid; i < kHeadsPerCta * D / 4; i += kThreads) {
    const int h = i / (D / 4), d = i % (D / 4) * 4;
    uint2 w{0u, 0u};
    if (h0 + h < a.heads) {
      const float4 v = load_aligned<float4>(a.q + (t * a.heads + h0 + h) * D + d);
      w.x = pack_bf16_pair(f32_to_bf16_bits(v.x), f32_to_bf16_bits(v.y));
      w.y = pack_bf16_pair(f32_to_bf16_bits(v.z), f32_to_bf16_bits(v.w));
    }
    *reinterpret_cast<uint2*>(qs + h * kStride + d) = w;
  }
  if (stage_key_part<kSlots, D, D, kThreads, kPad>(a, t, 0, 0, keys, rows, fp4s)) {
    attend_short<D, kBlocks>(a, smem, out, t, h0);
  } else {
    // No key at all: the combine's output for a running maximum still at kMinit, 0.
    for (int i = tid; i < kHeadsPerCta * D; i += kThreads)
      if (h0 + i / D < a.heads) out[(t * a.heads + h0 + i / D) * D + i % D] = 0.0f;
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

template <int D, int kBlocks>
void launch_short(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out) {
  constexpr size_t kBytes = ShortLayout<D, kBlocks>::kBytes;
  allow_dynamic_smem<attn_short_kernel<D, kBlocks>>(kBytes);
  const unsigned head_groups = static_cast<unsigned>((a.heads + kHeadsPerCta - 1) / kHeadsPerCta);
  FD_LAUNCH((attn_short_kernel<D, kBlocks>), dim3(static_cast<unsigned>(a.n), head_groups),
            dim3(kThreads), kBytes, stream, a, sink, out);
}

template <int D>
void launch_short_blocks(cudaStream_t stream, const AttnArgs& a, const float* sink, float* out) {
  if (a.blocks == 1)
    launch_short<D, 1>(stream, a, sink, out);
  else
    launch_short<D, 2>(stream, a, sink, out);
}

}  // namespace

bool attention_short_on_tensor_cores(cudaStream_t stream, const AttnArgs& a, const float* sink,
                                     float* out) {
  if (a.n == 0 || a.heads < 1 || a.blocks < 1 || a.blocks > kShortAttentionBlocks) return false;
  switch (a.dim) {
    case 64:
      launch_short_blocks<64>(stream, a, sink, out);
      return true;
    case 128:
      launch_short_blocks<128>(stream, a, sink, out);
      return true;
    case 256:
      launch_short_blocks<256>(stream, a, sink, out);
      return true;
    case 512:
      launch_short_blocks<512>(stream, a, sink, out);
      return true;
    default:
      return false;
  }
}

}  // namespace flashdesk::cuda
