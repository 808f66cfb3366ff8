// Mixture of experts on the CPU reference backend (docs/model-spec.md §5, docs/numerics.md "MoE"):
// sqrt-softplus routing with a selection-only bias, SwiGLU experts with the clamp, the routing
// weight applied before w2, FP32 accumulation over experts in ascending id, then the shared one.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/util/numeric.h"
#include "engine/util/torch_topk.h"

namespace flashdesk {
namespace {

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

}  // namespace

void CpuReferenceBackend::moe_route(const Tensor& logits, const Tensor& bias,
                                    const Tensor* bias_image, std::span<const uint8_t> image_rows,
                                    const RouteSettings& s, Tensor& ids, Tensor& weights) {
  const int64_t n = logits.rows(), E = logits.dim(1), k = s.topk;
  check_shape(bias, Shape{E}, "moe bias");
  check_shape(ids, Shape{n, k}, "moe ids");
  check_shape(weights, Shape{n, k}, "moe weights");
  FD_CHECK(k <= E, "moe: more experts per token than experts");
  std::vector<float> score(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
  for (int64_t i = 0; i < n; ++i) {
    const bool image = !image_rows.empty() && image_rows[static_cast<size_t>(i)] && bias_image;
    const float* b = (image ? *bias_image : bias).data<float>();
    for (int64_t e = 0; e < E; ++e) {
      float z = logits.data<float>()[i * E + e];
      if (s.gate_temp != 1.0f) z /= s.gate_temp;
      score[e] = std::sqrt(softplus(z));
      biased[e] = score[e] + b[e];
    }
    // torch.topk's choice and order (ties included), which the weights' sum follows.
    const std::vector<int32_t> order = torch_topk(biased, k, true);
    int32_t* id = ids.data<int32_t>() + i * k;
    float* w = weights.data<float>() + i * k;
    for (int64_t j = 0; j < k; ++j) w[j] = score[(id[j] = order[j])];
    const float sum = torch_row_sum(std::span<const float>(w, static_cast<size_t>(k)));
    for (int64_t j = 0; j < k; ++j) {
      if (s.norm_topk_prob && k > 1) w[j] /= sum + 1e-20f;
      w[j] *= s.route_scale;
    }
  }
}

namespace {

// a = bf16(silu(min(g, L)) * clamp(u, ±L) * weight) for one expert's rows (FP32 until the cast).
void swiglu(Tensor& g, const Tensor& u, std::span<const float> row_weight, float limit) {
  const int64_t n = g.rows(), inter = g.dim(1);
  float* gd = g.data<float>();
  const float* ud = u.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inter; ++j) {
      float gv = gd[i * inter + j], uv = ud[i * inter + j];
      if (limit > 0.0f) {
        uv = std::clamp(uv, -limit, limit);
        gv = std::min(gv, limit);
      }
      float a = gv / (1.0f + std::exp(-gv)) * uv;
      if (!row_weight.empty()) a *= row_weight[static_cast<size_t>(i)];
      gd[i * inter + j] = flashdesk::round_bf16(a);
    }
}

}  // namespace

void CpuReferenceBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                      std::span<const ExpertWeights* const> experts,
                                      const ExpertWeights* shared, float swiglu_limit, Tensor& y) {
  const int64_t n = x.rows(), d = x.dim(1), k = ids.dim(1);
  check_shape(y, Shape{n, d}, "moe out");
  check_shape(weights, ids.shape(), "moe weights");
  fill_zero(y);
  for (int64_t i = 0; i < ids.numel(); ++i)
    FD_CHECK(ids.data<int32_t>()[i] >= 0 &&
                 ids.data<int32_t>()[i] < static_cast<int32_t>(experts.size()),
             "moe: expert id out of range");
  // Runs one expert on rows `rows` of x and adds its output to those rows of y.
  auto run_expert = [&](const ExpertWeights& ex, std::span<const int64_t> rows,
                        std::span<const float> row_weight) {
    const int64_t m = static_cast<int64_t>(rows.size()), inter = ex.w1.out;
    Tensor xs = alloc(DType::F32, Shape{m, d});
    gather_rows(x, rows, xs);
    Tensor g = alloc(DType::F32, Shape{m, inter}), u = alloc(DType::F32, Shape{m, inter});
    linear(xs, ex.w1, kQuantLinear, g);
    linear(xs, ex.w3, kQuantLinear, u);
    swiglu(g, u, row_weight, swiglu_limit);
    Tensor o = alloc(DType::F32, Shape{m, d});
    linear(g, ex.w2, kQuantLinear, o);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t e = 0; e < d; ++e)
        y.data<float>()[rows[i] * d + e] += o.data<float>()[i * d + e];
  };
  std::vector<int64_t> rows;
  std::vector<float> row_weight;
  for (size_t e = 0; e < experts.size(); ++e) {
    rows.clear();
    row_weight.clear();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        if (ids.data<int32_t>()[i * k + j] == static_cast<int32_t>(e)) {
          rows.push_back(i);
          row_weight.push_back(weights.data<float>()[i * k + j]);
        }
    if (rows.empty() || experts[e] == nullptr) continue;
    run_expert(*experts[e], rows, row_weight);
  }
  if (shared) {
    std::vector<int64_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    run_expert(*shared, all, {});
  }
}

}  // namespace flashdesk
