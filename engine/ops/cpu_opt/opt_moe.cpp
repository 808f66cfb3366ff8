// MoE experts on the optimised CPU backend: rows grouped by expert, the input act-quantised once,
// then three pool passes over every active expert at once (w1 and w3, SwiGLU, w2) instead of
// one small pass per expert, and a per-token sum in the reference's order (routed experts in
// ascending id, then the shared expert), so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

using cpu_opt::padded_cols;

// One expert's share of the step: its rows of x, their routing weights (empty for the shared
// expert) and its buffers, all [rows, padded cols].
struct ExpertRun {
  const ExpertWeights* w = nullptr;
  std::vector<int64_t> rows;
  std::vector<float> row_weight;
  std::vector<float> x, g, u, out;
  cpu_opt::LinearJob w1, w3, w2;
};

// a = bf16(silu(min(g, L)) * clamp(u, ±L) * weight), the reference's scalar arithmetic.
float swiglu(float g, float u, float limit, const float* weight) {
  if (limit > 0.0f) {
    u = std::clamp(u, -limit, limit);
    g = std::min(g, limit);
  }
  float a = g / (1.0f + std::exp(-g)) * u;
  if (weight) a *= *weight;
  return round_bf16(a);
}

std::vector<ExpertRun> group_rows(const Tensor& ids, const Tensor& weights,
                                  std::span<const ExpertWeights* const> experts,
                                  const ExpertWeights* shared) {
  const int64_t n = ids.rows(), k = ids.dim(1);
  const int32_t* id = ids.data<int32_t>();
  std::vector<ExpertRun> runs(experts.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      ExpertRun& r = runs[static_cast<size_t>(id[i * k + j])];
      r.rows.push_back(i);
      r.row_weight.push_back(weights.data<float>()[i * k + j]);
    }
  for (size_t e = 0; e < experts.size(); ++e) runs[e].w = experts[e];
  std::erase_if(runs, [](const ExpertRun& r) { return r.rows.empty() || r.w == nullptr; });
  if (shared) {
    ExpertRun s;
    s.w = shared;
    for (int64_t i = 0; i < n; ++i) s.rows.push_back(i);
    runs.push_back(std::move(s));
  }
  return runs;
}

// Buffers and linear jobs of one expert; xq [n, ks] holds the act-quantised input rows.
void prepare_run(ExpertRun& r, const std::vector<float>& xq, int64_t ks) {
  const int64_t m = static_cast<int64_t>(r.rows.size()), inter = r.w->w1.out, d = r.w->w2.out,
                is = padded_cols(inter);
  FD_CHECK(r.w->w1.in == r.w->w3.in && r.w->w3.out == inter && r.w->w2.in == inter,
           r.w->w1.name + ": expert shapes disagree");
  r.x.resize(static_cast<size_t>(m * ks));
  for (int64_t i = 0; i < m; ++i)
    std::memcpy(&r.x[i * ks], &xq[r.rows[i] * ks], static_cast<size_t>(ks) * sizeof(float));
  r.g.assign(static_cast<size_t>(m * is), 0.0f);
  r.u.assign(static_cast<size_t>(m * is), 0.0f);
  r.out.resize(static_cast<size_t>(m * d));
  r.w1 = {r.x.data(), m, ks, &r.w->w1, r.g.data(), is, true};
  r.w3 = {r.x.data(), m, ks, &r.w->w3, r.u.data(), is, true};
  r.w2 = {r.g.data(), m, is, &r.w->w2, r.out.data(), d, true};
}

}  // namespace

void CpuOptimizedBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                      std::span<const ExpertWeights* const> experts,
                                      const ExpertWeights* shared, float swiglu_limit, Tensor& y) {
  const int64_t n = x.rows(), d = x.dim(1), ks = padded_cols(d);
  check_shape(y, Shape{n, d}, "moe out");
  check_shape(weights, ids.shape(), "moe weights");
  for (int64_t i = 0; i < ids.numel(); ++i)
    FD_CHECK(ids.data<int32_t>()[i] >= 0 &&
                 ids.data<int32_t>()[i] < static_cast<int32_t>(experts.size()),
             "moe: expert id out of range");
  std::vector<float> xq(static_cast<size_t>(n * ks), 0.0f);
  parallel_units(n, 4 * d, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      kernels().act_quant_row(x.data<float>() + i * d, d, &xq[i * ks]);
  });
  std::vector<ExpertRun> runs = group_rows(ids, weights, experts, shared);
  for (ExpertRun& r : runs) {
    FD_CHECK(r.w->w1.in == d && r.w->w2.out == d, r.w->w1.name + ": expert dim mismatch");
    prepare_run(r, xq, ks);
  }
  // Pass 1: w1 and w3 of every expert.
  std::vector<LinearTask> tasks;
  for (ExpertRun& r : runs) {
    add_linear_tasks(r.w1, 0, r.w1.w->out, tasks);
    add_linear_tasks(r.w3, 0, r.w3.w->out, tasks);
  }
  run_linear_tasks(tasks);
  // Pass 2: SwiGLU with the routing weight, then the act_quant of w2's input, in place in g.
  std::vector<std::pair<size_t, int64_t>> act_rows;  // (run, row)
  for (size_t e = 0; e < runs.size(); ++e)
    for (int64_t i = 0; i < runs[e].w1.n; ++i) act_rows.emplace_back(e, i);
  parallel_units(static_cast<int64_t>(act_rows.size()), 32 * d, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      ExpertRun& r = runs[act_rows[static_cast<size_t>(t)].first];
      const int64_t i = act_rows[static_cast<size_t>(t)].second, inter = r.w1.w->out;
      float* g = r.g.data() + i * r.w1.y_stride;
      const float* u = r.u.data() + i * r.w3.y_stride;
      const float* wt = r.row_weight.empty() ? nullptr : &r.row_weight[static_cast<size_t>(i)];
      for (int64_t j = 0; j < inter; ++j) g[j] = swiglu(g[j], u[j], swiglu_limit, wt);
      kernels().act_quant_row(g, inter, g);
    }
  });
  // Pass 3: w2 of every expert.
  tasks.clear();
  for (ExpertRun& r : runs) add_linear_tasks(r.w2, 0, d, tasks);
  run_linear_tasks(tasks);
  // Sum per token: runs are in ascending expert id with the shared expert last.
  std::vector<std::vector<std::pair<size_t, int64_t>>> parts(static_cast<size_t>(n));
  for (size_t e = 0; e < runs.size(); ++e)
    for (size_t i = 0; i < runs[e].rows.size(); ++i)
      parts[static_cast<size_t>(runs[e].rows[i])].emplace_back(e, static_cast<int64_t>(i));
  float* yd = y.data<float>();
  parallel_units(n, 8 * d, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* yt = yd + t * d;
      std::fill(yt, yt + d, 0.0f);
      for (const auto& [e, i] : parts[static_cast<size_t>(t)]) {
        const float* o = runs[e].out.data() + i * d;
        for (int64_t c = 0; c < d; ++c) yt[c] += o[c];
      }
    }
  });
}

}  // namespace flashdesk
