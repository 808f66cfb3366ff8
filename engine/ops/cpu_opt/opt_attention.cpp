// Sparse attention with sink on the optimised CPU backend (docs/numerics.md "Sparse
// attention"): window rows and every top-k entry used by the step are decoded once (not once
// per query), then each (query, group of heads) runs on one thread: register-blocked logits,
// the reference's softmax with std::exp, and the register-blocked weighted sum of the keys.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/cpu_opt/cpu_opt_backend.h"

namespace flashdesk {
namespace {

// Cache rows decoded to FP32 [rows.size(), dim].
std::vector<float> decode_rows(CpuOptimizedBackend& be, KvFormat f, const Tensor& cache,
                               std::span<const int64_t> rows, int64_t dim) {
  std::vector<float> out(rows.size() * static_cast<size_t>(dim));
  const int64_t row_bytes = cache.dim(1);
  be.parallel_units(static_cast<int64_t>(rows.size()), 2 * dim, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      be.kernels().dequantize_kv_row(f, cache.bytes() + rows[static_cast<size_t>(r)] * row_bytes,
                                     dim, &out[static_cast<size_t>(r * dim)]);
  });
  return out;
}

std::vector<int64_t> iota_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = i;
  return rows;
}

}  // namespace

void CpuOptimizedBackend::sparse_attention(const AttentionArgs& a, Tensor& out) {
  const Tensor& q = *a.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2);
  check_attention_args(a, out);
  const WindowKv& w = a.window;
  const int64_t n_step = w.step ? w.step->rows() : 0;
  const int64_t k_cols = a.topk ? a.topk->dim(1) : 0;
  const std::vector<float> ring =
      decode_rows(*this, KvFormat::Fp8Window, *w.ring, iota_rows(w.window), d);
  const std::vector<float> step =
      n_step ? decode_rows(*this, KvFormat::Fp8Window, *w.step, iota_rows(n_step), d)
             : std::vector<float>();
  // Entries used by any query, each decoded once; slot[j] = its row in `entries`.
  std::vector<int64_t> used;
  std::vector<int32_t> slot;
  if (a.topk) {
    slot.assign(static_cast<size_t>(a.compressed.n_entries), -1);
    const int32_t* ids = a.topk->data<int32_t>();
    for (int64_t i = 0; i < n * k_cols; ++i) {
      if (ids[i] < 0) continue;
      FD_CHECK(ids[i] < a.compressed.n_entries, "attention: top-k entry beyond the cache");
      if (slot[static_cast<size_t>(ids[i])] < 0) {
        slot[static_cast<size_t>(ids[i])] = static_cast<int32_t>(used.size());
        used.push_back(ids[i]);
      }
    }
  }
  const std::vector<float> entries =
      used.empty() ? std::vector<float>()
                   : decode_rows(*this, KvFormat::Fp4Entry, *a.compressed.rows, used, d);
  const float* sink = a.sink->data<float>();
  // Units: (query, group of heads). Decode has one query, so its heads are split over the pool.
  const int64_t groups = std::clamp<int64_t>((2 * pool().size() + n - 1) / n, 1, heads);
  const int64_t per_group = (heads + groups - 1) / groups;
  parallel_units(
      n * groups, (w.window + k_cols) * per_group * d * 2, [&](int64_t begin, int64_t end) {
        std::vector<const float*> keys;
        std::vector<float> p, acc;
        for (int64_t u = begin; u < end; ++u) {
          const int64_t t = u / groups, h0 = (u % groups) * per_group;
          const int64_t hg = std::min(per_group, heads - h0);
          if (hg <= 0) continue;
          // Keys in the reference's order: window positions ascending, then top-k columns.
          const int64_t pos_t = a.positions[static_cast<size_t>(t)];
          keys.clear();
          for (int64_t pos = std::max<int64_t>(0, pos_t - w.window + 1); pos <= pos_t; ++pos) {
            if (pos >= w.step_first_position) {
              FD_CHECK(pos - w.step_first_position < n_step,
                       "attention: query beyond the step's KV");
              keys.push_back(&step[static_cast<size_t>((pos - w.step_first_position) * d)]);
            } else if (w.ring_positions[static_cast<size_t>(pos % w.window)] == pos) {
              keys.push_back(&ring[static_cast<size_t>((pos % w.window) * d)]);
            }
          }
          for (int64_t c = 0; c < k_cols; ++c) {
            const int32_t j = a.topk->data<int32_t>()[t * k_cols + c];
            if (j >= 0)
              keys.push_back(&entries[static_cast<size_t>(slot[static_cast<size_t>(j)]) * d]);
          }
          float* o = out.data<float>() + (t * heads + h0) * d;
          if (keys.empty()) {
            std::fill(o, o + hg * d, 0.0f);
            continue;
          }
          const int64_t nk = static_cast<int64_t>(keys.size());
          p.resize(static_cast<size_t>(hg * nk));
          kernels().qk_logits(q.data<float>() + (t * heads + h0) * d, hg, keys.data(), nk, d,
                              a.softmax_scale, p.data());
          // The reference's softmax with the sink: FP32, std::exp, sums in key order.
          std::vector<float> denom(static_cast<size_t>(hg));
          for (int64_t h = 0; h < hg; ++h) {
            float* l = &p[static_cast<size_t>(h * nk)];
            const float mx = std::max(sink[h0 + h], *std::max_element(l, l + nk));
            float sum = 0.0f;
            for (int64_t i = 0; i < nk; ++i) sum += (l[i] = std::exp(l[i] - mx));
            denom[static_cast<size_t>(h)] = sum + std::exp(sink[h0 + h] - mx);
          }
          acc.assign(static_cast<size_t>(hg * d), 0.0f);
          kernels().pv_accumulate(p.data(), hg, keys.data(), nk, d, acc.data());
          for (int64_t h = 0; h < hg; ++h)
            kernels().divide_round_bf16(&acc[static_cast<size_t>(h * d)],
                                        denom[static_cast<size_t>(h)], d, o + h * d);
        }
      });
}

}  // namespace flashdesk
