// Sparse attention with sink on the CPU reference backend (docs/numerics.md "Sparse
// attention"): each query attends over its window keys (ring or this step's rows, FP8) and its
// top-k compressed entries (FP4), one softmax per head with the sink in the denominator.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"

namespace flashdesk {
namespace {

// All rows of an Fp8Window cache, dequantised: [rows, dim].
std::vector<float> dequantize_all(const Tensor* rows, int64_t dim) {
  if (!rows || rows->rows() == 0) return {};
  std::vector<float> out(static_cast<size_t>(rows->rows() * dim));
  for (int64_t r = 0; r < rows->rows(); ++r)
    cpu::dequantize_kv_row(KvFormat::Fp8Window, rows->bytes() + r * rows->dim(1), dim,
                           &out[r * dim]);
  return out;
}

}  // namespace

void CpuReferenceBackend::sparse_attention(const AttentionArgs& a, Tensor& out) {
  const Tensor& q = *a.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2);
  check_attention_args(a, out);
  const WindowKv& w = a.window;
  const int64_t n_step = w.step ? w.step->rows() : 0;
  const std::vector<float> ring = dequantize_all(w.ring, d);
  const std::vector<float> step = dequantize_all(w.step, d);
  const int64_t k_cols = a.topk ? a.topk->dim(1) : 0;
  const float* sink = a.sink->data<float>();
  const int64_t entry_bytes = kv_row_bytes(KvFormat::Fp4Entry, d);

  pool_->parallel_for(
      n, cpu::rows_per_task((w.window + k_cols) * heads * d), [&](int64_t begin, int64_t end) {
        std::vector<const float*> keys;
        std::vector<float> entries(static_cast<size_t>(std::max<int64_t>(k_cols, 1) * d));
        std::vector<float> logits, acc(static_cast<size_t>(d));
        for (int64_t t = begin; t < end; ++t) {
          const int64_t p = a.positions[static_cast<size_t>(t)];
          keys.clear();
          for (int64_t pos = std::max<int64_t>(0, p - w.window + 1); pos <= p; ++pos) {
            if (pos >= w.step_first_position) {
              FD_CHECK(pos - w.step_first_position < n_step,
                       "attention: query beyond the step's KV");
              keys.push_back(&step[(pos - w.step_first_position) * d]);
            } else if (w.ring_positions[static_cast<size_t>(pos % w.window)] == pos) {
              keys.push_back(&ring[(pos % w.window) * d]);
            }
          }
          for (int64_t c = 0; c < k_cols; ++c) {
            const int32_t j = a.topk->data<int32_t>()[t * k_cols + c];
            if (j < 0) continue;
            FD_CHECK(j < a.compressed.n_entries, "attention: top-k entry beyond the cache");
            float* e = &entries[static_cast<size_t>(c * d)];
            cpu::dequantize_kv_row(KvFormat::Fp4Entry, a.compressed.rows->bytes() + j * entry_bytes,
                                   d, e);
            keys.push_back(e);
          }
          logits.resize(keys.size());
          for (int64_t h = 0; h < heads; ++h) {
            const float* qh = q.data<float>() + (t * heads + h) * d;
            float* o = out.data<float>() + (t * heads + h) * d;
            if (keys.empty()) {
              std::fill(o, o + d, 0.0f);
              continue;
            }
            float mx = sink[h];
            for (size_t i = 0; i < keys.size(); ++i)
              mx = std::max(mx, logits[i] = cpu::dot(qh, keys[i], d) * a.softmax_scale);
            float denom = 0.0f;
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (size_t i = 0; i < keys.size(); ++i) {
              const float pi = std::exp(logits[i] - mx);
              denom += pi;
              for (int64_t e = 0; e < d; ++e) acc[e] += pi * keys[i][e];
            }
            denom += std::exp(sink[h] - mx);
            for (int64_t e = 0; e < d; ++e) o[e] = flashdesk::round_bf16(acc[e] / denom);
          }
        }
      });
}

}  // namespace flashdesk
