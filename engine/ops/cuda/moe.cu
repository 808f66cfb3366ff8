// Mixture of experts on the CUDA backend (MODEL-REFERENCE §5, docs/numerics.md "MoE").
//   moe_route: one block per token: sqrt-softplus scores, top-k of the biased scores by repeated
//     block arg-max, or, when two of the k + 1 best are equal, by torch's selection run step by
//     step (engine/util/torch_select.h); normalised and scaled weights; ids stay on the device.
//   moe_experts, up to 8 rows: the routed and shared experts of every row in one grouped launch per
//     stage, reading ids and weights on the device through a table of expert weight pointers:
//     gate and up rows with SwiGLU fused (each warp one inter row of w1 and of w3), then the down
//     projection per expert slot, then the FP32 sum over each row's experts in ascending id, then
//     the shared expert. More rows: per-expert GEMMs over the rows routed to it (ids read back).
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/gemv_device.cuh"
#include "engine/ops/cuda/linear.cuh"
#include "engine/util/torch_select.h"

namespace flashdesk {
namespace cuda {
namespace {

constexpr int kRouteThreads = 256;
constexpr int64_t kMaxExpertCols = 8192;  // staged activation columns of the grouped kernels

// One expert's three matrices as the kernels read them (w1, w3: [inter, dim]; w2: [dim, inter]).
struct ExpertEntry {
  const uint8_t* data[3];
  const uint8_t* scale[3];
  int64_t scale_cols[3];
  int32_t format[3];  // WeightFormat
  int64_t inter, dim;
};

struct SlotArgs {
  const ExpertEntry* table;  // [n_routed + 1]: the shared expert last
  const int32_t* ids;        // [n, k]
  const float* weights;      // [n, k]
  int64_t n, k, slots_per_row, n_routed;
  int has_shared;
  float limit;
};

// The expert of slot s (row s / slots_per_row, column j): routed columns j < k, then the shared.
__device__ __forceinline__ int64_t slot_expert(const SlotArgs& a, int64_t s, float* weight) {
  const int64_t t = s / a.slots_per_row, j = s % a.slots_per_row;
  if (j < a.k) {
    *weight = a.weights[t * a.k + j];
    return a.ids[t * a.k + j];
  }
  *weight = 1.0f;
  return a.n_routed;
}

__device__ __forceinline__ GemvParams matrix(const ExpertEntry& e, int m, int64_t k) {
  GemvParams p{};
  p.w = e.data[m];
  p.scale = e.scale[m];
  p.scale_cols = e.scale_cols[m];
  p.k = k;
  p.vec_ok = k % 4 == 0;
  return p;
}

// Dot products of rows ra (of pa) and rb (of pb) with xs [k], over the whole warp.
template <WeightFormat F>
__device__ void dot_pair(const GemvParams& pa, int64_t ra, const GemvParams& pb, int64_t rb,
                         const float* xs, float* out_a, float* out_b) {
  constexpr int VW = Chunk<F>::VW;
  const unsigned lane = threadIdx.x & 31u;
  float acc_a = 0.0f, acc_b = 0.0f;
  for (int64_t c0 = lane * VW; c0 < pa.k; c0 += 32 * VW * kUnroll) {
    typename Chunk<F>::Raw wa[kUnroll] = {}, wb[kUnroll] = {};
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * 32 * VW;
      if (c >= pa.k) continue;
      wa[u] = load_raw<F>(pa, ra, c);
      if (rb >= 0) wb[u] = load_raw<F>(pb, rb, c);
    }
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * 32 * VW;
      if (c >= pa.k) continue;
      float va[VW], vb[VW];
      decode<F>(wa[u], va);
      decode<F>(wb[u], vb);
      float sa = 0.0f, sb = 0.0f;
      for (int v = 0; v < VW; ++v) {
        sa += xs[c + v] * va[v];
        sb += xs[c + v] * vb[v];
      }
      acc_a += sa * block_scale<F>(pa, ra, c);
      if (rb >= 0) acc_b += sb * block_scale<F>(pb, rb, c);
    }
  }
  *out_a = warp_sum(acc_a);
  *out_b = warp_sum(acc_b);
}

template <class Fn>
__device__ void with_format(int32_t format, Fn&& fn) {
  switch (static_cast<WeightFormat>(format)) {
    case WeightFormat::Fp8Block:
      fn.template operator()<WeightFormat::Fp8Block>();
      break;
    case WeightFormat::Fp4Row:
      fn.template operator()<WeightFormat::Fp4Row>();
      break;
    case WeightFormat::Bf16:
      fn.template operator()<WeightFormat::Bf16>();
      break;
    case WeightFormat::F32:
      fn.template operator()<WeightFormat::F32>();
      break;
  }
}

// grid (inter blocks of 8 rows, slots): h[slot][i] = bf16(silu(min(g, L)) * clamp(u, ±L) * w)
// with g = bf16(w1_i . act_quant(x)), u = bf16(w3_i . act_quant(x)).
__global__ void __launch_bounds__(kGemvThreads)
    expert_up_kernel(SlotArgs a, const float* x, int64_t h_stride, float* h) {
  __shared__ __align__(16) float xs[kMaxExpertCols];
  const int64_t slot = blockIdx.y;
  float weight;
  const int64_t e = slot_expert(a, slot, &weight);
  const ExpertEntry& ex = a.table[e];
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * (kGemvThreads / 32);
  if (ex.data[0] == nullptr || i0 >= ex.inter) return;  // whole block: another device's expert
  const int64_t t = slot / a.slots_per_row;
  stage_rows(x + t * ex.dim, ex.dim, 1, ex.dim, 1, xs, kMaxExpertCols);
  __syncthreads();
  const int64_t i = i0 + (threadIdx.x >> 5);
  if (i >= ex.inter) return;
  const GemvParams p1 = matrix(ex, 0, ex.dim), p3 = matrix(ex, 1, ex.dim);
  float g = 0.0f, u = 0.0f;
  with_format(ex.format[0], [&]<WeightFormat F>() { dot_pair<F>(p1, i, p3, i, xs, &g, &u); });
  if ((threadIdx.x & 31u) != 0) return;
  g = round_bf16(g);
  u = round_bf16(u);
  if (a.limit > 0.0f) {
    u = fminf(fmaxf(u, -a.limit), a.limit);
    g = fminf(g, a.limit);
  }
  float v = __fmul_rn(g / (1.0f + expf(-g)), u);
  if (e != a.n_routed) v = __fmul_rn(v, weight);
  h[slot * h_stride + i] = round_bf16(v);
}

// grid (dim blocks of 16 rows, slots): o[slot][d] = bf16(w2_d . act_quant(h[slot])).
__global__ void __launch_bounds__(kGemvThreads)
    expert_down_kernel(SlotArgs a, const float* h, int64_t h_stride, int64_t dim, float* o) {
  __shared__ __align__(16) float xs[kMaxExpertCols];
  const int64_t slot = blockIdx.y;
  float weight;
  const ExpertEntry& ex = a.table[slot_expert(a, slot, &weight)];
  if (ex.data[0] == nullptr) return;
  stage_rows(h + slot * h_stride, ex.inter, 1, ex.inter, 1, xs, kMaxExpertCols);
  __syncthreads();
  const int64_t d = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5) * 2;
  if (d >= dim) return;
  const GemvParams p2 = matrix(ex, 2, ex.inter);
  const int64_t d2 = d + 1 < dim ? d + 1 : -1;
  float y0 = 0.0f, y1 = 0.0f;
  with_format(ex.format[2], [&]<WeightFormat F>() { dot_pair<F>(p2, d, p2, d2, xs, &y0, &y1); });
  if ((threadIdx.x & 31u) != 0) return;
  o[slot * dim + d] = round_bf16(y0);
  if (d2 >= 0) o[slot * dim + d2] = round_bf16(y1);
}

// y[t][d] = sum of row t's routed expert outputs in ascending expert id, then the shared one
// (FP32, unrounded); experts of another device (null table entries) are skipped.
__global__ void expert_sum_kernel(SlotArgs a, const float* o, int64_t dim, float* y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.n * dim) return;
  const int64_t t = i / dim, d = i % dim;
  int32_t last = -1;
  float acc = 0.0f;
  for (int64_t r = 0; r < a.k; ++r) {  // selection sort: the next larger id each round
    int64_t pick = -1;
    for (int64_t j = 0; j < a.k; ++j) {
      const int32_t id = a.ids[t * a.k + j];
      if (id > last && (pick < 0 || id < a.ids[t * a.k + pick])) pick = j;
    }
    if (pick < 0) break;
    last = a.ids[t * a.k + pick];
    if (a.table[last].data[0] != nullptr) acc += o[(t * a.slots_per_row + pick) * dim + d];
  }
  if (a.has_shared) acc += o[(t * a.slots_per_row + a.k) * dim + d];
  y[i] = acc;
}

// ---- routing ----

struct Best {
  float v;
  int32_t i;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

__device__ Best block_best(Best b, Best* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(kFullMask, b.v, o), __shfl_xor_sync(kFullMask, b.i, o)};
    b = better(b, other);
  }
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  Best r{0.0f, -1};
  for (unsigned w = 0; w < blockDim.x / 32; ++w) r = better(r, scratch[w]);
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const float* logits, const float* bias, const float* bias_image,
                 const uint8_t* image_rows, int64_t E, int64_t k, float gate_temp, float scale,
                 int norm, int32_t* ids, float* weights) {
  FD_DYNAMIC_SMEM(float, score);
  float* biased = score + E;
  __shared__ Best scratch[kRouteThreads / 32];
  const int64_t t = blockIdx.x;
  const float* b = (image_rows && image_rows[t] && bias_image) ? bias_image : bias;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    float z = logits[t * E + e];
    if (gate_temp != 1.0f) z /= gate_temp;
    const float sp = z > 20.0f ? z : log1pf(expf(z));
    score[e] = sqrtf(sp);
    biased[e] = score[e] + b[e];
  }
  __syncthreads();
  // The k best by repeated block maxima (ties to the lower expert), and one more: when no two of
  // them are equal, torch's sorted topk returns exactly these in this order.
  bool tie = false;
  float previous = 0.0f;
  for (int64_t j = 0; j < lmin(k + 1, E); ++j) {
    Best mine{0.0f, -1};
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
      if (biased[e] == biased[e]) mine = better(mine, Best{biased[e], static_cast<int32_t>(e)});
    const Best top = block_best(mine, scratch);
    if (threadIdx.x == 0) {
      tie = tie || (j > 0 && top.v == previous);
      previous = top.v;
      if (j < k) ids[t * k + j] = top.i;
      biased[top.i] = __int_as_float(0x7FC00000);  // NaN: taken
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (tie) {
    // torch's choice and order among equal scores (docs/numerics.md "Top-k").
    auto* pairs = reinterpret_cast<torch_select::Scored*>(biased + E);
    for (int64_t e = 0; e < E; ++e)
      pairs[e] = torch_select::Scored{score[e] + b[e], static_cast<int32_t>(e)};
    torch_select::select(pairs, E, k, true);
    for (int64_t j = 0; j < k; ++j) ids[t * k + j] = pairs[j].index;
  }
  float* w_row = weights + t * k;
  for (int64_t j = 0; j < k; ++j) w_row[j] = score[ids[t * k + j]];
  // torch's order for k = 6 (torch_row_sum, engine/util/torch_topk.h), else index order.
  float sum = 0.0f;
  if (k == 6) {
    sum = ((((w_row[0] + w_row[4]) + w_row[5]) + w_row[1]) + w_row[2]) + w_row[3];
  } else {
    for (int64_t j = 0; j < k; ++j) sum += w_row[j];
  }
  for (int64_t j = 0; j < k; ++j) {
    float w = weights[t * k + j];
    if (norm && k > 1) w /= sum + 1e-20f;
    weights[t * k + j] = w * scale;
  }
}

// ---- many rows: per-expert GEMMs ----

__global__ void swiglu_rows_kernel(float* g, const float* u, const float* row_weight, int64_t m,
                                   int64_t inter, float limit) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * inter) return;
  float gv = g[i], uv = u[i];
  if (limit > 0.0f) {
    uv = fminf(fmaxf(uv, -limit), limit);
    gv = fminf(gv, limit);
  }
  float a = __fmul_rn(gv / (1.0f + expf(-gv)), uv);
  if (row_weight) a = __fmul_rn(a, row_weight[i / inter]);
  g[i] = round_bf16(a);
}

// out slot rows [slot[i]] = o rows [i] (the per-expert outputs placed for the ordered sum).
__global__ void place_rows_kernel(const float* o, const int64_t* slots, int64_t m, int64_t dim,
                                  float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * dim) return;
  out[slots[i / dim] * dim + i % dim] = o[i];
}

ExpertEntry entry_of(const ExpertWeights* ex) {
  ExpertEntry e{};
  if (!ex) return e;
  const LinearWeight* m[3] = {&ex->w1, &ex->w3, &ex->w2};
  for (int j = 0; j < 3; ++j) {
    e.data[j] = m[j]->data.bytes();
    e.scale[j] = m[j]->scale.defined() ? m[j]->scale.bytes() : nullptr;
    e.scale_cols[j] = m[j]->scale.defined() ? m[j]->scale.dim(1) : 0;
    e.format[j] = static_cast<int32_t>(m[j]->format);
  }
  e.inter = ex->w1.out;
  e.dim = ex->w1.in;
  return e;
}

}  // namespace
}  // namespace cuda

using cuda::blocks_for;
using cuda::ptr;

void CudaBackend::moe_route(const Tensor& logits, const Tensor& bias, const Tensor* bias_image,
                            std::span<const uint8_t> image_rows, const RouteSettings& s,
                            Tensor& ids, Tensor& weights) {
  const int64_t n = logits.rows(), E = logits.dim(1), k = s.topk;
  check_shape(bias, Shape{E}, "moe bias");
  check_shape(ids, Shape{n, k}, "moe ids");
  check_shape(weights, Shape{n, k}, "moe weights");
  FD_CHECK(k <= E, "moe: more experts per token than experts");
  FD_CHECK(image_rows.empty() || static_cast<int64_t>(image_rows.size()) == n,
           "moe: one image flag per row");
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  Tensor image;
  if (!image_rows.empty()) image = ctx_->upload_span(image_rows, DType::U8);
  FD_LAUNCH(cuda::route_kernel, dim3(static_cast<unsigned>(n)), dim3(cuda::kRouteThreads),
            static_cast<size_t>(2 * E) * sizeof(float) +
                static_cast<size_t>(E) * sizeof(torch_select::Scored),
            ctx_->stream(), ptr<const float>(logits), ptr<const float>(bias),
            bias_image ? ptr<const float>(*bias_image) : nullptr,
            image.defined() ? ptr<const uint8_t>(image) : nullptr, E, k, s.gate_temp, s.route_scale,
            static_cast<int>(s.norm_topk_prob), ptr<int32_t>(ids), ptr<float>(weights));
}

void CudaBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                              std::span<const ExpertWeights* const> experts,
                              const ExpertWeights* shared, float swiglu_limit, Tensor& y) {
  const int64_t n = x.rows(), d = x.dim(1), k = ids.dim(1);
  const int64_t E = static_cast<int64_t>(experts.size());
  check_shape(y, Shape{n, d}, "moe out");
  check_shape(weights, ids.shape(), "moe weights");
  check_dtype(ids, DType::I32, "moe ids");
  if (n == 0) return;
  cuda::DeviceGuard g(ctx_->device());
  // The pointer table (uploaded again only when the experts change).
  std::vector<cuda::ExpertEntry> table(static_cast<size_t>(E + 1));
  int64_t max_inter = 0;
  for (int64_t e = 0; e <= E; ++e) {
    const ExpertWeights* ex = e < E ? experts[static_cast<size_t>(e)] : shared;
    table[static_cast<size_t>(e)] = cuda::entry_of(ex);
    if (ex) {
      FD_CHECK(ex->w1.in == d && ex->w2.out == d && ex->w3.out == ex->w1.out,
               "moe: expert " + std::to_string(e) + " does not match the activation width");
      max_inter = std::max(max_inter, ex->w1.out);
    }
  }
  const int64_t slots_per_row = k + (shared ? 1 : 0);
  Tensor o = ctx_->scratch(DType::F32, Shape{n * slots_per_row, d});
  Tensor dev_table =
      ctx_->upload_cached(experts.data(), table.data(), table.size() * sizeof(table[0]));
  cuda::SlotArgs a{ptr<const cuda::ExpertEntry>(dev_table),
                   ptr<const int32_t>(ids),
                   ptr<const float>(weights),
                   n,
                   k,
                   slots_per_row,
                   E,
                   shared != nullptr,
                   swiglu_limit};
  const int64_t slots = n * slots_per_row;
  if (n <= cuda::kGemvTokens && d <= cuda::kMaxExpertCols && max_inter <= cuda::kMaxExpertCols) {
    Tensor h = ctx_->scratch(DType::F32, Shape{slots, max_inter});
    FD_LAUNCH(cuda::expert_up_kernel,
              dim3(blocks_for(max_inter, cuda::kGemvThreads / 32), static_cast<unsigned>(slots)),
              dim3(cuda::kGemvThreads), 0, ctx_->stream(), a, ptr<const float>(x), max_inter,
              ptr<float>(h));
    FD_LAUNCH(cuda::expert_down_kernel,
              dim3(blocks_for(d, cuda::kRowsPerBlock), static_cast<unsigned>(slots)),
              dim3(cuda::kGemvThreads), 0, ctx_->stream(), a, ptr<const float>(h), max_inter, d,
              ptr<float>(o));
  } else {
    // Rows per expert need the ids on the host.
    std::vector<int32_t> host_ids(static_cast<size_t>(n * k));
    std::vector<float> host_w(static_cast<size_t>(n * k));
    read(ids, host_ids.data(), host_ids.size() * 4);
    read(weights, host_w.data(), host_w.size() * 4);
    auto run = [&](const ExpertWeights& ex, const std::vector<int64_t>& rows,
                   const std::vector<float>* row_weight, const std::vector<int64_t>& slot_rows) {
      const int64_t m = static_cast<int64_t>(rows.size()), inter = ex.w1.out;
      Tensor xs = ctx_->scratch(DType::F32, Shape{m, d});
      gather_rows(x, rows, xs);
      Tensor gt = ctx_->scratch(DType::F32, Shape{m, inter});
      Tensor ut = ctx_->scratch(DType::F32, Shape{m, inter});
      cuda::run_linear(*ctx_, ptr<const float>(xs), m, ex.w1, kQuantLinear, ptr<float>(gt));
      cuda::run_linear(*ctx_, ptr<const float>(xs), m, ex.w3, kQuantLinear, ptr<float>(ut));
      Tensor rw;
      if (row_weight) rw = ctx_->upload_span(std::span<const float>(*row_weight), DType::F32);
      FD_LAUNCH(cuda::swiglu_rows_kernel, dim3(blocks_for(m * inter, 256)), dim3(256), 0,
                ctx_->stream(), ptr<float>(gt), ptr<const float>(ut),
                rw.defined() ? ptr<const float>(rw) : nullptr, m, inter, swiglu_limit);
      Tensor out = ctx_->scratch(DType::F32, Shape{m, d});
      cuda::run_linear(*ctx_, ptr<const float>(gt), m, ex.w2, kQuantLinear, ptr<float>(out));
      Tensor dst = ctx_->upload_span(std::span<const int64_t>(slot_rows), DType::I64);
      FD_LAUNCH(cuda::place_rows_kernel, dim3(blocks_for(m * d, 256)), dim3(256), 0, ctx_->stream(),
                ptr<const float>(out), ptr<const int64_t>(dst), m, d, ptr<float>(o));
    };
    for (int32_t id : host_ids) FD_CHECK(id >= 0 && id < E, "moe: expert id out of range");
    std::vector<int64_t> rows, slot_rows;
    std::vector<float> row_weight;
    for (int64_t e = 0; e < E; ++e) {
      rows.clear();
      slot_rows.clear();
      row_weight.clear();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          if (host_ids[static_cast<size_t>(i * k + j)] == e) {
            rows.push_back(i);
            slot_rows.push_back(i * slots_per_row + j);
            row_weight.push_back(host_w[static_cast<size_t>(i * k + j)]);
          }
      if (!rows.empty() && experts[static_cast<size_t>(e)])
        run(*experts[static_cast<size_t>(e)], rows, &row_weight, slot_rows);
    }
    if (shared) {
      rows.resize(static_cast<size_t>(n));
      slot_rows.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        rows[static_cast<size_t>(i)] = i;
        slot_rows[static_cast<size_t>(i)] = i * slots_per_row + k;
      }
      run(*shared, rows, nullptr, slot_rows);
    }
  }
  FD_LAUNCH(cuda::expert_sum_kernel, dim3(blocks_for(n * d, 256)), dim3(256), 0, ctx_->stream(), a,
            ptr<const float>(o), d, ptr<float>(y));
}

}  // namespace flashdesk
