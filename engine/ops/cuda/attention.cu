// Sparse attention with sink on the CUDA backend (docs/numerics.md "Sparse attention"), split over
// the key list and then combined. The list of a query is its W window slots then its top-k
// entries; the definition runs an online softmax over consecutive blocks of 64 slots. Here each
// 64-slot block is one unit of work:
//   1. scores: s = q.k * scale per (query, head, slot), -inf for empty slots;
//   2. block partials: with M_b the running maximum after block b (the maximum over blocks <= b,
//      from the scores), p = exp(s - M_b), S_b = sum p, A_b = sum bf16(p) * v;
//   3. combine: the definition's recurrence unrolled, acc = sum_b A_b * exp(M_b - M), denominator
//      sum_b S_b * exp(M_b - M) + exp(sink - M), out = bf16(acc / denominator).
// Each p is the one the sequential definition computes, so only FP32 summation order differs.
// Keys are dequantised into shared memory as BF16 (exact for FP8 window rows and FP4 entries).
#include <algorithm>
#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/kv_format.h"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kBlockSlots = 64;  // the definition's softmax block
constexpr int kHalf = 32;        // slots staged at a time
constexpr int kHeads = 8;        // heads per CUDA block (one warp each)
constexpr int kThreads = 32 * kHeads;
constexpr int64_t kMaxDim = 512;
constexpr float kMinit = -1e30f;

struct AttnArgs {
  const float* q;  // [n, H, D]
  const int64_t* positions;
  const int64_t* ring_positions;  // [W]
  const uint8_t* ring;            // [W, win_bytes]
  const uint8_t* step;            // [n_step, win_bytes]
  int64_t step_first, window;
  const uint8_t* entries;  // [*, entry_bytes]
  int64_t n_entries;
  const int32_t* topk;  // [n, kc]
  int64_t kc;
  int64_t n, heads, dim, slots, blocks;  // slots = W + kc, blocks = ceil(slots / 64)
  float softmax_scale;
};

// The cache row behind slot s of query t (nullptr: empty); *fp4 says which format it has.
__device__ const uint8_t* slot_row(const AttnArgs& a, int64_t t, int64_t s, bool* fp4) {
  *fp4 = false;
  if (s >= a.slots) return nullptr;
  if (s < a.window) {
    const int64_t p = a.positions[t];
    const int64_t pos = lmax(0, p - a.window + 1) + s;
    if (pos > p) return nullptr;
    const int64_t win_bytes = a.dim + a.dim / 32;
    if (pos >= a.step_first) return a.step + (pos - a.step_first) * win_bytes;
    const int64_t slot = pos % a.window;
    return a.ring_positions[slot] == pos ? a.ring + slot * win_bytes : nullptr;
  }
  const int32_t id = a.topk[t * a.kc + (s - a.window)];
  if (id < 0 || id >= a.n_entries) return nullptr;
  *fp4 = true;
  return a.entries + static_cast<int64_t>(id) * (a.dim / 2 + a.dim / 16);
}

// Slots [first, first + 32) of query t as BF16 rows keys[32][dim + 2] (the pad keeps lanes that
// read different rows on different banks); valid[i] says whether slot first + i has a key. Each
// thread decodes groups of 4 consecutive values (a 4-byte FP8 word or a 2-byte FP4 pair) and
// issues all its loads before it decodes any: the rows are scattered over the caches, so the
// loads' latency, not their bytes, is what this costs.
constexpr int kGroupsPerThread = kHalf * (kMaxDim / 4) / kThreads;  // 16 at dim 512

__device__ void stage_keys(const AttnArgs& a, int64_t t, int64_t first, uint16_t* keys, int* valid,
                           const uint8_t** rows, int* fp4s) {
  const int64_t stride = a.dim + 2, groups_per_row = a.dim / 4;
  if (threadIdx.x < kHalf) {
    bool fp4 = false;
    rows[threadIdx.x] = slot_row(a, t, first + threadIdx.x, &fp4);
    fp4s[threadIdx.x] = fp4;
    valid[threadIdx.x] = rows[threadIdx.x] != nullptr;
  }
  __syncthreads();
  // Window rows are dim + dim / 32 bytes: 4-byte aligned when dim is a multiple of 128 (the
  // model's 512); FP4 rows (9 dim / 16 bytes) are always 2-byte aligned.
  const bool words_aligned = (a.dim + a.dim / 32) % 4 == 0;
  uint32_t raw[kGroupsPerThread];
  uint8_t scale[kGroupsPerThread];
  FD_UNROLL
  for (int u = 0; u < kGroupsPerThread; ++u) {
    const int64_t g = threadIdx.x + static_cast<int64_t>(u) * kThreads;
    raw[u] = 0;
    scale[u] = 0;
    if (g >= kHalf * groups_per_row) continue;
    const int64_t s = g / groups_per_row, d = (g % groups_per_row) * 4;
    const uint8_t* row = rows[s];
    if (row && !fp4s[s]) {  // FP8 window row: dim codes, then one UE8M0 scale per 32
      if (words_aligned)
        raw[u] = load_aligned<uint32_t>(row + d);
      else
        raw[u] = row[d] | (row[d + 1] << 8) | (row[d + 2] << 16) | (uint32_t{row[d + 3]} << 24);
      scale[u] = row[a.dim + d / 32];
    } else if (row) {  // FP4 entry: dim / 2 bytes of codes, then one E4M3 scale per 16
      raw[u] = load_aligned<uint16_t>(row + d / 2);
      scale[u] = row[a.dim / 2 + d / 16];
    }
  }
  FD_UNROLL
  for (int u = 0; u < kGroupsPerThread; ++u) {
    const int64_t g = threadIdx.x + static_cast<int64_t>(u) * kThreads;
    if (g >= kHalf * groups_per_row) continue;
    const int64_t s = g / groups_per_row, d = (g % groups_per_row) * 4;
    uint16_t* out = keys + s * stride + d;
    if (!rows[s]) {
      for (int v = 0; v < 4; ++v) out[v] = 0;
    } else if (!fp4s[s]) {
      const float sc = e8m0_to_f32(scale[u]);
      for (int v = 0; v < 4; ++v)
        out[v] = f32_to_bf16_bits(e4m3_to_f32((raw[u] >> (8 * v)) & 0xFFu) * sc);
    } else {
      const float sc = e4m3_to_f32(scale[u]);
      for (int v = 0; v < 4; ++v)
        out[v] = f32_to_bf16_bits(e2m1_to_f32((raw[u] >> (4 * v)) & 0xFu) * sc);
    }
  }
  __syncthreads();
}

// grid (n, blocks, head groups): scores[t][h][s] for the 64 slots of block blockIdx.y.
__global__ void __launch_bounds__(kThreads) attn_scores_kernel(AttnArgs a, float* scores) {
  FD_DYNAMIC_SMEM(uint16_t, keys);
  __shared__ int valid[kHalf];
  __shared__ const uint8_t* rows[kHalf];
  __shared__ int fp4s[kHalf];
  const int64_t t = blockIdx.x, b = blockIdx.y;
  const int64_t h = static_cast<int64_t>(blockIdx.z) * kHeads + (threadIdx.x >> 5);
  const unsigned lane = threadIdx.x & 31u;
  const int64_t stride = a.dim + 2;
  for (int half = 0; half < 2; ++half) {
    const int64_t first = b * kBlockSlots + half * kHalf;
    stage_keys(a, t, first, keys, valid, rows, fp4s);
    if (h < a.heads) {
      const float* q = a.q + (t * a.heads + h) * a.dim;
      const uint16_t* k = keys + lane * stride;
      float acc = 0.0f;
      for (int64_t d = 0; d < a.dim; d += 2) {
        const uint32_t pair = load_aligned<uint32_t>(k + d);
        acc += q[d] * bf16_bits_to_f32(pair & 0xFFFFu);
        acc += q[d + 1] * bf16_bits_to_f32(pair >> 16);
      }
      scores[(t * a.heads + h) * (a.blocks * kBlockSlots) + first + lane] =
          valid[lane] ? acc * a.softmax_scale : -INFINITY;
    }
    __syncthreads();  // the next half overwrites the keys
  }
}

// grid (n, blocks, head groups): M_b, S_b and A_b of block blockIdx.y for 8 heads.
__global__ void __launch_bounds__(kThreads)
    attn_block_kernel(AttnArgs a, const float* scores, float* part_m, float* part_s,
                      float* part_acc) {
  FD_DYNAMIC_SMEM(uint16_t, keys);
  __shared__ int valid[kHalf];
  __shared__ const uint8_t* rows[kHalf];
  __shared__ int fp4s[kHalf];
  __shared__ float p_bf16[kHeads][kBlockSlots];
  const int64_t t = blockIdx.x, b = blockIdx.y, h0 = static_cast<int64_t>(blockIdx.z) * kHeads;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const int64_t list = a.blocks * kBlockSlots;
  // Warp w: head h0 + w's running maximum, p and S_b.
  const int64_t h = h0 + warp;
  if (h < a.heads) {
    const float* sc = scores + (t * a.heads + h) * list;
    float m = kMinit;
    for (int64_t s = lane; s < (b + 1) * kBlockSlots; s += 32) m = fmaxf(m, sc[s]);
    m = warp_max(m);
    const float s0 = sc[b * kBlockSlots + lane], s1 = sc[b * kBlockSlots + 32 + lane];
    const float p0 = expf(s0 - m), p1 = expf(s1 - m);
    p_bf16[warp][lane] = round_bf16(p0);
    p_bf16[warp][32 + lane] = round_bf16(p1);
    const float sum = warp_sum(p0 + p1);
    if (lane == 0) {
      part_m[(t * a.blocks + b) * a.heads + h] = m;
      part_s[(t * a.blocks + b) * a.heads + h] = sum;
    }
  }
  // A_b: thread j owns dims j and j + 256 of every head.
  float acc[kHeads][2];
  for (int i = 0; i < kHeads; ++i) acc[i][0] = acc[i][1] = 0.0f;
  const int64_t stride = a.dim + 2;
  for (int half = 0; half < 2; ++half) {
    stage_keys(a, t, b * kBlockSlots + half * kHalf, keys, valid, rows, fp4s);
    for (int s = 0; s < kHalf; ++s) {
      if (!valid[s]) continue;  // p is 0 there; skipping also skips 0 * NaN
      const uint16_t* v = keys + s * stride;
      for (int e = 0; e < 2; ++e) {
        const int64_t d = threadIdx.x + e * kThreads;
        if (d >= a.dim) continue;
        const float vd = bf16_bits_to_f32(v[d]);
        for (int i = 0; i < kHeads; ++i) acc[i][e] += p_bf16[i][half * kHalf + s] * vd;
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < kHeads; ++i) {
    if (h0 + i >= a.heads) break;
    for (int e = 0; e < 2; ++e) {
      const int64_t d = threadIdx.x + e * kThreads;
      if (d < a.dim) part_acc[((t * a.blocks + b) * a.heads + h0 + i) * a.dim + d] = acc[i][e];
    }
  }
}

// grid (n, heads): the blocks combined, the sink added, out = bf16(acc / denominator).
__global__ void attn_combine_kernel(AttnArgs a, const float* part_m, const float* part_s,
                                    const float* part_acc, const float* sink, float* out) {
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const float m = part_m[(t * a.blocks + a.blocks - 1) * a.heads + h];
  float denom = 0.0f;
  for (int64_t b = 0; b < a.blocks; ++b) {
    const int64_t i = (t * a.blocks + b) * a.heads + h;
    denom += part_s[i] * expf(part_m[i] - m);
  }
  denom += expf(sink[h] - m);
  for (int64_t d = threadIdx.x; d < a.dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t b = 0; b < a.blocks; ++b) {
      const int64_t i = (t * a.blocks + b) * a.heads + h;
      acc += part_acc[i * a.dim + d] * expf(part_m[i] - m);
    }
    out[(t * a.heads + h) * a.dim + d] = m <= kMinit ? 0.0f : round_bf16(acc / denom);
  }
}

}  // namespace
}  // namespace cuda

using cuda::ptr;

void CudaBackend::sparse_attention(const AttentionArgs& args, Tensor& out) {
  check_attention_args(args, out);
  const Tensor& q = *args.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2);
  FD_CHECK(d % 32 == 0 && d <= cuda::kMaxDim, "sparse_attention: head dim must be 32..512");
  const WindowKv& w = args.window;
  const int64_t n_step = w.step ? w.step->rows() : 0;
  for (int64_t p : args.positions)
    FD_CHECK(p < w.step_first_position || p - w.step_first_position < n_step,
             "attention: query beyond the step's KV");
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  cuda::AttnArgs a{};
  a.heads = heads;
  a.dim = d;
  a.window = w.window;
  a.kc = args.topk ? args.topk->dim(1) : 0;
  a.slots = w.window + a.kc;
  a.blocks = (a.slots + cuda::kBlockSlots - 1) / cuda::kBlockSlots;
  a.softmax_scale = args.softmax_scale;
  a.step_first = w.step_first_position;
  a.ring = ptr<const uint8_t>(*w.ring);
  a.step = n_step ? ptr<const uint8_t>(*w.step) : nullptr;
  a.entries = args.topk ? ptr<const uint8_t>(*args.compressed.rows) : nullptr;
  a.n_entries = args.topk ? args.compressed.n_entries : 0;
  Tensor ring_pos = ctx_->upload_span(w.ring_positions, DType::I64);
  a.ring_positions = ptr<const int64_t>(ring_pos);
  const size_t key_bytes = static_cast<size_t>(cuda::kHalf * (d + 2)) * sizeof(uint16_t);
  const unsigned groups = static_cast<unsigned>((heads + cuda::kHeads - 1) / cuda::kHeads);
  // Queries in chunks whose block partials stay under ~64 MiB.
  const int64_t per_query = a.blocks * heads * (d + 2) * 4;
  const int64_t chunk = std::max<int64_t>(1, (int64_t{64} << 20) / per_query);
  for (int64_t t0 = 0; t0 < n; t0 += chunk) {
    const int64_t m = std::min(chunk, n - t0);
    a.n = m;
    a.q = ptr<const float>(q) + t0 * heads * d;
    Tensor pos = ctx_->upload_span(
        args.positions.subspan(static_cast<size_t>(t0), static_cast<size_t>(m)), DType::I64);
    a.positions = ptr<const int64_t>(pos);
    a.topk = args.topk ? ptr<const int32_t>(*args.topk) + t0 * a.kc : nullptr;
    Tensor scores = ctx_->scratch(DType::F32, Shape{m, heads, a.blocks * cuda::kBlockSlots});
    Tensor pm = ctx_->scratch(DType::F32, Shape{m, a.blocks, heads});
    Tensor ps = ctx_->scratch(DType::F32, Shape{m, a.blocks, heads});
    Tensor pa = ctx_->scratch(DType::F32, Shape{m, a.blocks, heads, d});
    const dim3 grid(static_cast<unsigned>(m), static_cast<unsigned>(a.blocks), groups);
    FD_LAUNCH(cuda::attn_scores_kernel, grid, dim3(cuda::kThreads), key_bytes, ctx_->stream(), a,
              ptr<float>(scores));
    FD_LAUNCH(cuda::attn_block_kernel, grid, dim3(cuda::kThreads), key_bytes, ctx_->stream(), a,
              ptr<const float>(scores), ptr<float>(pm), ptr<float>(ps), ptr<float>(pa));
    FD_LAUNCH(cuda::attn_combine_kernel,
              dim3(static_cast<unsigned>(m), static_cast<unsigned>(heads)),
              dim3(static_cast<unsigned>(std::min<int64_t>(d, 256))), 0, ctx_->stream(), a,
              ptr<const float>(pm), ptr<const float>(ps), ptr<const float>(pa),
              ptr<const float>(*args.sink), ptr<float>(out) + t0 * heads * d);
  }
}

}  // namespace flashdesk
