// Sparse attention with sink on the CUDA backend (docs/numerics.md "Sparse attention"), split over
// the key list and then combined. The list of a query is its W window slots then its top-k
// entries; the definition runs an online softmax over consecutive blocks of 64 slots. Here each
// 32-slot half of a block is one unit of work, and for decode-sized calls also each quarter of
// the head dim (a decode step has few blocks: halves and quarters give it 8 times the CTAs, each
// with an eighth of the chain; prefill keeps the head dim whole, see kMaxQuarters):
//   1. scores: the dots q.k over each dim part per (query, head, slot), -inf for empty slots;
//      a score is the parts' sum (in order) times the scale, formed once with the blocks'
//      running maxima;
//   2. half partials: with M_b the running maximum after block b (the maximum over blocks <= b,
//      from the scores), p = exp(s - M_b), S = sum p, A = sum bf16(p) * v over the half (each
//      CTA its dim part of A);
//   3. combine: the definition's recurrence unrolled, acc = sum A * exp(M_b - M), denominator
//      sum S * exp(M_b - M) + exp(sink - M), out = bf16(acc / denominator).
// Each p is the one the sequential definition computes, so only FP32 summation order differs.
// Keys are dequantised into shared memory as BF16 (exact for FP8 window rows and FP4 entries).
#include <algorithm>
#include <vector>

#include "engine/ops/cuda/attention_args.cuh"
#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/kv_format.h"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kHalf = 32;  // slots staged at a time
constexpr int kHeads = 8;  // heads per CUDA block (one warp each)
// The head dim is split over Q CTAs (template argument): 4 where the undivided kernels would not
// fill the GPU (decode), 1 where they do (prefill: there a split only multiplies each CTA's fixed
// latency, the slot lookups and barriers, by the number of parts).
constexpr int kMaxQuarters = 4;
constexpr int kThreads = 32 * kHeads;

// Slots [first, first + 32) of query t, dims [d_lo, d_lo + qd) of each, as BF16 rows
// keys[32][qd + 2] (the pad keeps lanes that read different rows on different banks); valid[i]
// says whether slot first + i has a key. Each thread decodes groups of 4 consecutive values (a
// 4-byte FP8 word or a 2-byte FP4 pair) and issues all its loads before it decodes any: the rows
// are scattered over the caches, so the loads' latency, not their bytes, is what this costs.
template <int Q>
constexpr int kGroupsPerThread = kHalf*(kMaxDim / Q / 4) / kThreads;  // 16 / Q at dim 512

template <int Q>
__device__ void stage_keys(const AttnArgs& a, int64_t t, int64_t first, int d_lo, int qd,
                           uint16_t* keys, int* valid, const uint8_t** rows, int* fp4s) {
  // 32-bit index arithmetic: a 64-bit division is a ~70-instruction routine, and these loops'
  // divisions were a third of what a decode step's attention warps issued.
  const int stride = qd + 2, groups_per_row = qd / 4;
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
  // Group u of this thread is slot s0 + u * s_step, dims d0..d0+3, when a row's groups divide the
  // block (dim 512: 32 groups a quarter row): no division per group.
  const bool even = kThreads % groups_per_row == 0;
  const int s0 = static_cast<int>(threadIdx.x) / groups_per_row,
            d0 = static_cast<int>(threadIdx.x) % groups_per_row * 4,
            s_step = even ? kThreads / groups_per_row : 0;
  auto group_at = [&](int u, int* s, int* d) {
    const int g = static_cast<int>(threadIdx.x) + u * kThreads;
    if (g >= kHalf * groups_per_row) return false;
    if (even) {
      *s = s0 + u * s_step;
      *d = d0;
    } else {
      *s = g / groups_per_row;
      *d = g % groups_per_row * 4;
    }
    return true;
  };
  uint32_t raw[kGroupsPerThread<Q>];
  uint8_t scale[kGroupsPerThread<Q>];
  FD_UNROLL
  for (int u = 0; u < kGroupsPerThread<Q>; ++u) {
    raw[u] = 0;
    scale[u] = 0;
    int s, dq;
    if (!group_at(u, &s, &dq)) continue;
    const int d = d_lo + dq;  // the dim in the row
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
  // Decoded by placing the code bits in an FP32 word (e4m3_exact / e2m1_exact): a few
  // instructions a value where the general decoders' branches were most of the staging.
  FD_UNROLL
  for (int u = 0; u < kGroupsPerThread<Q>; ++u) {
    int s, dq;
    if (!group_at(u, &s, &dq)) continue;
    uint16_t* out = keys + s * stride + dq;
    if (!rows[s]) {
      for (int v = 0; v < 4; ++v) out[v] = 0;
    } else if (!fp4s[s]) {
      const float sc = e8m0_to_f32(scale[u]);
      for (int v = 0; v < 4; ++v)
        out[v] = f32_to_bf16_bits(e4m3_exact((raw[u] >> (8 * v)) & 0xFFu) * sc);
    } else {
      const float sc = e4m3_exact(scale[u]);
      for (int v = 0; v < 4; ++v)
        out[v] = f32_to_bf16_bits(e2m1_exact((raw[u] >> (4 * v)) & 0xFu) * sc);
    }
  }
  __syncthreads();
}

// The CTA's place: query blockIdx.x, 32-slot half blockIdx.y, head group and dim quarter from
// blockIdx.z.
struct CtaPlace {
  int64_t t, hb, h0;
  int quarter, d_lo, qd;
};
template <int Q>
__device__ CtaPlace cta_place(const AttnArgs& a) {
  CtaPlace c;
  c.t = blockIdx.x;
  c.hb = blockIdx.y;
  c.h0 = static_cast<int64_t>(blockIdx.z / Q) * kHeads;
  c.quarter = static_cast<int>(blockIdx.z % Q);
  c.qd = static_cast<int>(a.dim) / Q;
  c.d_lo = c.quarter * c.qd;
  return c;
}

// grid (n, 2 * blocks, head groups * 4): the partial dot products q.k over one dim quarter for
// the 32 slots of half blockIdx.y, parts[quarter][t][h][slot] (-inf for empty slots). Halves and
// quarters rather than whole 64-slot blocks and rows: a decode step has few blocks, and one CTA
// per block staging and dotting whole rows left a 61 µs chain on 16 CTAs (H200).
template <int Q>
__global__ void __launch_bounds__(kThreads) attn_scores_kernel(AttnArgs a, float* parts) {
  FD_GRID_PROLOGUE();
  FD_DYNAMIC_SMEM(uint16_t, keys);
  __shared__ int valid[kHalf];
  __shared__ const uint8_t* rows[kHalf];
  __shared__ int fp4s[kHalf];
  const CtaPlace c = cta_place<Q>(a);
  const int64_t h = c.h0 + (threadIdx.x >> 5);
  const unsigned lane = threadIdx.x & 31u;
  const int64_t first = c.hb * kHalf;
  stage_keys<Q>(a, c.t, first, c.d_lo, c.qd, keys, valid, rows, fp4s);
  if (h >= a.heads) return;
  const float* q = a.q + (c.t * a.heads + h) * a.dim + c.d_lo;
  const uint16_t* k = keys + lane * (c.qd + 2);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // four chains: one left each warp on its latency
  for (int d = 0; d < c.qd; d += 4) {       // qd is a multiple of 8
    const float4 qv = load_aligned<float4>(q + d);
    const uint32_t lo = load_aligned<uint32_t>(k + d), hi = load_aligned<uint32_t>(k + d + 2);
    acc[0] += qv.x * bf16_bits_to_f32(lo & 0xFFFFu);
    acc[1] += qv.y * bf16_bits_to_f32(lo >> 16);
    acc[2] += qv.z * bf16_bits_to_f32(hi & 0xFFFFu);
    acc[3] += qv.w * bf16_bits_to_f32(hi >> 16);
  }
  const float dot = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  const int64_t list = a.blocks * kBlockSlots;
  parts[((c.quarter * a.n + c.t) * a.heads + h) * list + first + lane] =
      valid[lane] ? dot : -INFINITY;
}

// grid (n, head groups), a warp per head: each slot's score, the quarters' dots summed in order
// times the scale, written over the first quarter's; and each 64-slot block's running maximum
// M_b (over blocks <= b) into run_max[t][b][h]. Once per (query, head): the block kernel's CTAs
// (every half and quarter) computing the maxima themselves doubled a Full layer's block kernel.
template <int Q>
__global__ void __launch_bounds__(kThreads)
    attn_finish_scores_kernel(AttnArgs a, float* parts, float* run_max) {
  FD_GRID_PROLOGUE();
  const int64_t t = blockIdx.x, h = static_cast<int64_t>(blockIdx.y) * kHeads + (threadIdx.x >> 5);
  if (h >= a.heads) return;
  const unsigned lane = threadIdx.x & 31u;
  const int64_t list = a.blocks * kBlockSlots, quarter_stride = a.n * a.heads * list;
  float* row = parts + (t * a.heads + h) * list;
  float m = kMinit;
  for (int64_t b = 0; b < a.blocks; ++b) {
    FD_UNROLL
    for (int half = 0; half < 2; ++half) {
      float* p = row + b * kBlockSlots + half * 32 + lane;
      float dot = p[0];
      FD_UNROLL
      for (int q = 1; q < Q; ++q) dot += p[q * quarter_stride];
      const float score = dot * a.softmax_scale;
      p[0] = score;
      m = fmaxf(m, score);
    }
    m = warp_max(m);
    if (lane == 0) run_max[(t * a.blocks + b) * a.heads + h] = m;
  }
}

template <int Q>
constexpr int kMaxOutputs = kMaxDim / Q* kHeads / kThreads;  // (dim, head) outputs per thread

// grid (n, 2 * blocks, head groups * 4): for half blockIdx.y (32 slots) of 64-slot block b, with
// M_b the running maximum after block b (attn_finish_scores_kernel): M_b and the half's sum of p
// (the first quarter writes them), and the half's sum of bf16(p) * v over this CTA's dim quarter,
// for 8 heads.
template <int Q>
__global__ void __launch_bounds__(kThreads)
    attn_block_kernel(AttnArgs a, const float* scores, const float* run_max, float* part_m,
                      float* part_s, float* part_acc) {
  FD_GRID_PROLOGUE();
  FD_DYNAMIC_SMEM(uint16_t, keys);
  __shared__ int valid[kHalf];
  __shared__ const uint8_t* rows[kHalf];
  __shared__ int fp4s[kHalf];
  __shared__ float p_bf16[kHeads][kHalf];
  const CtaPlace c = cta_place<Q>(a);
  const int64_t b = c.hb / 2, halves = 2 * a.blocks;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  // Warp w: head h0 + w's running maximum, p and the half's sum.
  const int64_t h = c.h0 + warp;
  if (h < a.heads) {
    const float m = run_max[(c.t * a.blocks + b) * a.heads + h];
    const float p =
        expf(scores[(c.t * a.heads + h) * a.blocks * kBlockSlots + c.hb * kHalf + lane] - m);
    p_bf16[warp][lane] = round_bf16(p);
    const float sum = warp_sum(p);
    if (lane == 0 && c.quarter == 0) {
      part_m[(c.t * halves + c.hb) * a.heads + h] = m;
      part_s[(c.t * halves + c.hb) * a.heads + h] = sum;
    }
  }
  stage_keys<Q>(a, c.t, c.hb * kHalf, c.d_lo, c.qd, keys, valid, rows, fp4s);  // publishes p too
  // Output o = (head o / qd, dim o % qd) of the quarter: thread j takes j, j + 256, ...
  float acc[kMaxOutputs<Q>];
  FD_UNROLL
  for (int i = 0; i < kMaxOutputs<Q>; ++i) acc[i] = 0.0f;
  const int stride = c.qd + 2, outputs = c.qd * kHeads;
  for (int s = 0; s < kHalf; ++s) {
    if (!valid[s]) continue;  // p is 0 there; skipping also skips 0 * NaN
    const uint16_t* v = keys + s * stride;
    FD_UNROLL
    for (int i = 0; i < kMaxOutputs<Q>; ++i) {
      const int o = static_cast<int>(threadIdx.x) + i * kThreads;
      if (o < outputs) acc[i] += p_bf16[o / c.qd][s] * bf16_bits_to_f32(v[o % c.qd]);
    }
  }
  FD_UNROLL
  for (int i = 0; i < kMaxOutputs<Q>; ++i) {
    const int o = static_cast<int>(threadIdx.x) + i * kThreads;
    const int64_t hh = c.h0 + o / c.qd;
    if (o < outputs && hh < a.heads)
      part_acc[((c.t * halves + c.hb) * a.heads + hh) * a.dim + c.d_lo + o % c.qd] = acc[i];
  }
}

// grid (n, heads): the parts (32-slot halves here, 64-slot blocks from attention_split_tc.cu)
// combined, the sink added, out = bf16(acc / denominator); with a.unrotate_freq, then RoPE undone
// on the head's rope pairs as rope_kernel does it (one launch a layer fewer).
__global__ void attn_combine_kernel(AttnArgs a, int64_t halves, const float* part_m,
                                    const float* part_s, const float* part_acc, const float* sink,
                                    float* out) {
  FD_GRID_PROLOGUE();
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const float m = part_m[(t * halves + halves - 1) * a.heads + h];
  float denom = 0.0f;
  for (int64_t b = 0; b < halves; ++b) {
    const int64_t i = (t * halves + b) * a.heads + h;
    denom += part_s[i] * expf(part_m[i] - m);
  }
  denom += expf(sink[h] - m);
  for (int64_t d = threadIdx.x; d < a.dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t b = 0; b < halves; ++b) {
      const int64_t i = (t * halves + b) * a.heads + h;
      acc += part_acc[i * a.dim + d] * expf(part_m[i] - m);
    }
    out[(t * a.heads + h) * a.dim + d] = m <= kMinit ? 0.0f : round_bf16(acc / denom);
  }
  if (a.unrotate_freq == nullptr) return;
  __syncthreads();  // the block's outputs written (and visible to the block) before the pairs
  float* rot = out + (t * a.heads + h) * a.dim + a.dim - 2 * a.rope_pairs;
  for (int64_t p = threadIdx.x; p < a.rope_pairs; p += blockDim.x)
    rope_pair(rot + 2 * p, a.positions[t], a.unrotate_freq[p], -1.0f);
}

}  // namespace
}  // namespace cuda

using cuda::ptr;

void CudaBackend::sparse_attention(const AttentionArgs& args, Tensor& out) {
  attend(args, {}, out);
}

void CudaBackend::sparse_attention_unrotated(const AttentionArgs& args,
                                             std::span<const float> inv_freq, Tensor& out) {
  if (!fuse_) return Backend::sparse_attention_unrotated(args, inv_freq, out);
  attend(args, inv_freq, out);
}

void CudaBackend::attend(const AttentionArgs& args, std::span<const float> unrotate_freq,
                         Tensor& out) {
  check_attention_args(args, out);
  const Tensor& q = *args.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2);
  FD_CHECK(d % 32 == 0 && d <= cuda::kMaxDim, "sparse_attention: head dim must be 32..512");
  static_assert(32 % (4 * cuda::kMaxQuarters) == 0, "a dim part must hold whole 4-value groups");
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
  a.ring = ptr<const uint8_t>(*w.ring);
  a.step = n_step ? ptr<const uint8_t>(*w.step) : nullptr;
  a.entries = args.topk ? ptr<const uint8_t>(*args.compressed.rows) : nullptr;
  // The ring's positions and the step's two values in one upload.
  std::vector<int64_t> ring_and_step(w.ring_positions.begin(), w.ring_positions.end());
  ring_and_step.push_back(w.step_first_position);
  ring_and_step.push_back(args.topk ? args.compressed.n_entries : 0);
  Tensor ring_pos = ctx_->upload_span(std::span<const int64_t>(ring_and_step), DType::I64);
  a.ring_positions = ptr<const int64_t>(ring_pos);
  a.step_values = a.ring_positions + w.ring_positions.size();
  const int64_t pairs = static_cast<int64_t>(unrotate_freq.size());
  FD_CHECK(2 * pairs <= d, "sparse_attention: more rope pairs than the head dim holds");
  // The inverse RoPE in the combine kernel where the path has one; else rope() afterwards.
  Tensor freq;
  if (pairs > 0) {
    freq = ctx_->upload_span(unrotate_freq, DType::F32);
    a.unrotate_freq = ptr<const float>(freq);
    a.rope_pairs = pairs;
  }
  const unsigned groups = static_cast<unsigned>((heads + cuda::kHeads - 1) / cuda::kHeads);
  // Queries in chunks whose block partials stay under ~64 MiB.
  const int64_t per_query =
      (cuda::kMaxQuarters * a.blocks * cuda::kBlockSlots + 2 * a.blocks * (d + 2)) * heads * 4;
  const int64_t chunk = std::max<int64_t>(1, (int64_t{64} << 20) / per_query);
  // Where the undivided kernels' CTAs would not fill the GPU twice (decode): the split tensor-core
  // kernels, or the head dim in 4 parts on the CUDA cores; otherwise the tensor-core kernel of a
  // CTA per query where it takes the shapes.
  // Points `a` at queries [t0, t0 + m): their q rows, positions (uploaded: the tensor returned
  // must live until the chunk's kernels are queued) and top-k rows.
  auto bind_queries = [&](int64_t t0, int64_t m) {
    a.n = m;
    a.q = ptr<const float>(q) + t0 * heads * d;
    Tensor pos = ctx_->upload_span(
        args.positions.subspan(static_cast<size_t>(t0), static_cast<size_t>(m)), DType::I64);
    a.positions = ptr<const int64_t>(pos);
    a.topk = args.topk ? ptr<const int32_t>(*args.topk) + t0 * a.kc : nullptr;
    return pos;
  };
  using K = AttentionKernels;
  const int64_t undivided_ctas = std::min(chunk, n) * 2 * a.blocks * groups;
  const bool small = undivided_ctas < 2 * ctx_->multiprocessors();
  const K kernels = attention_kernels_ != K::Auto      ? attention_kernels_
                    : small && attention_tensor_cores_ ? K::TensorCoresSplit
                    : small                            ? K::CudaCoresQuarters
                    : attention_tensor_cores_          ? K::TensorCores
                                                       : K::CudaCoresWhole;
  if (kernels == K::TensorCoresSplit) {
    // Decode: the tensor-core kernels split over the key list (attention_split_tc.cu), then the
    // combine.
    const int64_t list = a.blocks * cuda::kBlockSlots;
    const int64_t split_per_query =
        (list + (cuda::kSplitSlotParts + 2) * a.blocks + a.blocks * d) * heads * 4;
    const int64_t split_chunk = std::max<int64_t>(1, (int64_t{64} << 20) / split_per_query);
    bool launched = true;
    for (int64_t t0 = 0; t0 < n && launched; t0 += split_chunk) {
      const int64_t m = std::min(split_chunk, n - t0);
      const Tensor pos = bind_queries(t0, m);
      Tensor scores = ctx_->scratch(DType::F32, Shape{m, heads, list});
      Tensor quarter_max =
          ctx_->scratch(DType::F32, Shape{m, a.blocks * cuda::kSplitSlotParts, heads});
      Tensor pm = ctx_->scratch(DType::F32, Shape{m, a.blocks, heads});
      Tensor ps = ctx_->scratch(DType::F32, Shape{m, a.blocks, heads});
      Tensor pa = ctx_->scratch(DType::F32, Shape{m, a.blocks, heads, d});
      const cuda::SplitScratch split{ptr<float>(scores), ptr<float>(quarter_max), ptr<float>(pm),
                                     ptr<float>(ps), ptr<float>(pa)};
      launched = cuda::attention_split_on_tensor_cores(ctx_->stream(), a, split);
      if (launched)
        FD_LAUNCH(cuda::attn_combine_kernel,
                  dim3(static_cast<unsigned>(m), static_cast<unsigned>(heads)),
                  dim3(static_cast<unsigned>(std::min<int64_t>(d, 256))), 0, ctx_->stream(), a,
                  a.blocks, ptr<const float>(pm), ptr<const float>(ps), ptr<const float>(pa),
                  ptr<const float>(*args.sink), ptr<float>(out) + t0 * heads * d);
    }
    if (launched) return;
  }
  if (kernels == K::TensorCores) {
    const Tensor pos = bind_queries(0, n);
    // Hopper's warpgroup products where they run (attention_wgmma_sm90a.cu) and are asked for,
    // else mma.sync.
    using W = AttentionWarpgroups;
    const bool asked =
        attention_warpgroups_ == W::On || (attention_warpgroups_ == W::Auto && a.blocks <= 2);
    const bool warpgroups =
        asked && cuda::attention_on_warpgroups(ctx_->stream(), a, ptr<const float>(*args.sink),
                                               ptr<float>(out));
    if (warpgroups) ++attention_warpgroup_calls_;
    if (warpgroups || cuda::attention_on_tensor_cores(
                          ctx_->stream(), a, ptr<const float>(*args.sink), ptr<float>(out))) {
      if (pairs > 0) rope(out, d, args.positions, unrotate_freq, true);
      return;
    }
  }
  const int quarters = kernels == K::CudaCoresQuarters ? 4 : 1;
  auto run = [&]<int Q>() {
    const size_t key_bytes = static_cast<size_t>(cuda::kHalf * (d / Q + 2)) * sizeof(uint16_t);
    for (int64_t t0 = 0; t0 < n; t0 += chunk) {
      const int64_t m = std::min(chunk, n - t0);
      const Tensor pos = bind_queries(t0, m);
      Tensor parts = ctx_->scratch(DType::F32, Shape{Q, m, heads, a.blocks * cuda::kBlockSlots});
      Tensor pm = ctx_->scratch(DType::F32, Shape{m, 2 * a.blocks, heads});
      Tensor ps = ctx_->scratch(DType::F32, Shape{m, 2 * a.blocks, heads});
      Tensor pa = ctx_->scratch(DType::F32, Shape{m, 2 * a.blocks, heads, d});
      const dim3 halves(static_cast<unsigned>(m), static_cast<unsigned>(2 * a.blocks), groups * Q);
      FD_LAUNCH(cuda::attn_scores_kernel<Q>, halves, dim3(cuda::kThreads), key_bytes,
                ctx_->stream(), a, ptr<float>(parts));
      Tensor run_max = ctx_->scratch(DType::F32, Shape{m, a.blocks, heads});
      FD_LAUNCH(cuda::attn_finish_scores_kernel<Q>, dim3(static_cast<unsigned>(m), groups),
                dim3(cuda::kThreads), 0, ctx_->stream(), a, ptr<float>(parts), ptr<float>(run_max));
      FD_LAUNCH(cuda::attn_block_kernel<Q>, halves, dim3(cuda::kThreads), key_bytes, ctx_->stream(),
                a, ptr<const float>(parts), ptr<const float>(run_max), ptr<float>(pm),
                ptr<float>(ps), ptr<float>(pa));
      FD_LAUNCH(cuda::attn_combine_kernel,
                dim3(static_cast<unsigned>(m), static_cast<unsigned>(heads)),
                dim3(static_cast<unsigned>(std::min<int64_t>(d, 256))), 0, ctx_->stream(), a,
                2 * a.blocks, ptr<const float>(pm), ptr<const float>(ps), ptr<const float>(pa),
                ptr<const float>(*args.sink), ptr<float>(out) + t0 * heads * d);
    }
  };
  if (quarters == 4)
    run.template operator()<4>();
  else
    run.template operator()<1>();
}

}  // namespace flashdesk
