// Sparse attention with sink on the optimised CPU backend (docs/numerics.md "Sparse
// attention"): window rows and every top-k entry used by the step are decoded once (not once
// per query), then each (query, group of heads) runs on one thread: register-blocked logits,
// the official block-wise online softmax with std::exp, and the register-blocked weighted sums.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

// Key-list slots per step of the official kernel's online softmax (as the reference backend).
constexpr int64_t kAttentionBlock = 64;

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
        std::vector<int64_t> block_of;  // the official kernel's 64-slot block of each key
        std::vector<float> p, p_run, acc;
        for (int64_t u = begin; u < end; ++u) {
          const int64_t t = u / groups, h0 = (u % groups) * per_group;
          const int64_t hg = std::min(per_group, heads - h0);
          if (hg <= 0) continue;
          // The official key list (docs/numerics.md): W window slots from max(0, p - W + 1),
          // then the top-k columns; only the slots holding a key are kept, with their block.
          const int64_t pos_t = a.positions[static_cast<size_t>(t)];
          const int64_t first = std::max<int64_t>(0, pos_t - w.window + 1);
          keys.clear();
          block_of.clear();
          for (int64_t pos = first; pos <= pos_t; ++pos) {
            const float* key = nullptr;
            if (pos >= w.step_first_position) {
              FD_CHECK(pos - w.step_first_position < n_step,
                       "attention: query beyond the step's KV");
              key = &step[static_cast<size_t>((pos - w.step_first_position) * d)];
            } else if (w.ring_positions[static_cast<size_t>(pos % w.window)] == pos) {
              key = &ring[static_cast<size_t>((pos % w.window) * d)];
            }
            if (key) {
              keys.push_back(key);
              block_of.push_back((pos - first) / kAttentionBlock);
            }
          }
          for (int64_t c = 0; c < k_cols; ++c) {
            const int32_t j = a.topk->data<int32_t>()[t * k_cols + c];
            if (j < 0) continue;
            keys.push_back(&entries[static_cast<size_t>(slot[static_cast<size_t>(j)]) * d]);
            block_of.push_back((w.window + c) / kAttentionBlock);
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
          acc.assign(static_cast<size_t>(hg * d), 0.0f);
          std::vector<float> running_max(static_cast<size_t>(hg), -1e30f);
          std::vector<float> denom(static_cast<size_t>(hg), 0.0f);
          // The official online softmax, one run of keys (one 64-slot block) at a time: the
          // reference's arithmetic per head (std::exp, sums in list order, bf16 probabilities in
          // the weighted sum), the weighted sums of all heads in one register-blocked call.
          for (int64_t i0 = 0; i0 < nk;) {
            int64_t i1 = i0 + 1;
            while (i1 < nk && block_of[static_cast<size_t>(i1)] == block_of[static_cast<size_t>(i0)])
              ++i1;
            const int64_t run = i1 - i0;
            p_run.resize(static_cast<size_t>(hg * run));
            for (int64_t h = 0; h < hg; ++h) {
              const float* l = &p[static_cast<size_t>(h * nk + i0)];
              const float new_max = std::max(running_max[static_cast<size_t>(h)],
                                             *std::max_element(l, l + run));
              const float rescale = std::exp(running_max[static_cast<size_t>(h)] - new_max);
              float block_sum = 0.0f;
              for (int64_t i = 0; i < run; ++i) {
                const float pi = std::exp(l[i] - new_max);
                block_sum += pi;
                p_run[static_cast<size_t>(h * run + i)] = flashdesk::round_bf16(pi);
              }
              float* acc_h = &acc[static_cast<size_t>(h * d)];
              for (int64_t e = 0; e < d; ++e) acc_h[e] *= rescale;
              denom[static_cast<size_t>(h)] = denom[static_cast<size_t>(h)] * rescale + block_sum;
              running_max[static_cast<size_t>(h)] = new_max;
            }
            kernels().pv_accumulate(p_run.data(), hg, keys.data() + i0, run, d, acc.data());
            i0 = i1;
          }
          for (int64_t h = 0; h < hg; ++h)
            kernels().divide_round_bf16(
                &acc[static_cast<size_t>(h * d)],
                denom[static_cast<size_t>(h)] +
                    std::exp(sink[h0 + h] - running_max[static_cast<size_t>(h)]),
                d, o + h * d);
        }
      });
}

}  // namespace flashdesk
