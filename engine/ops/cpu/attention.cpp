// Sparse attention with sink on the CPU reference backend (docs/numerics.md "Sparse
// attention"): each query attends over its window keys (ring or this step's rows, FP8) and its
// top-k compressed entries (FP4) with the official kernel's block-wise online softmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"

namespace flashdesk {
namespace {

// Key-list slots per step of the official kernel's online softmax.
constexpr int64_t kAttentionBlock = 64;

// All rows of an Fp8Window cache, dequantised: [rows, dim].
std::vector<float> dequantize_all(const Tensor* rows, int64_t dim) {
  if (!rows || rows->rows() == 0) return {};
  std::vector<float> out(static_cast<size_t>(rows->rows() * dim));
  for (int64_t r = 0; r < rows->rows(); ++r)
    cpu::dequantize_kv_row(KvFormat::Fp8Window, rows->bytes() + r * rows->dim(1), dim,
                           &out[r * dim]);
  return out;
}

// One query head over the key list, as the official sparse-attention kernel computes it: an
// online softmax over consecutive blocks of kAttentionBlock list slots with a running maximum of
// the scores alone (from -1e30; the sink is not in it), each probability rounded to bf16 before
// it weighs its value while the denominator sums the FP32 ones, exp(sink - max) added at the end.
// Empty slots (nullptr) take no part; a list without keys gives 0 (the kernel's 0 / inf).
void attend_one_head(const float* q, const std::vector<const float*>& slots, int64_t d, float scale,
                     float sink, std::vector<float>& logits, std::vector<float>& acc, float* o) {
  float running_max = -1e30f, denom = 0.0f;
  bool any = false;
  std::fill(acc.begin(), acc.end(), 0.0f);
  const int64_t n_slots = static_cast<int64_t>(slots.size());
  for (int64_t b0 = 0; b0 < n_slots; b0 += kAttentionBlock) {
    const int64_t b1 = std::min(n_slots, b0 + kAttentionBlock);
    float block_max = -std::numeric_limits<float>::infinity();
    for (int64_t i = b0; i < b1; ++i)
      if (slots[static_cast<size_t>(i)])
        block_max =
            std::max(block_max, logits[i - b0] = cpu::dot(q, slots[i], d) * scale);
    if (block_max == -std::numeric_limits<float>::infinity()) continue;  // nothing to add
    any = true;
    const float new_max = std::max(running_max, block_max);
    const float rescale = std::exp(running_max - new_max);
    float block_sum = 0.0f;
    for (int64_t e = 0; e < d; ++e) acc[e] *= rescale;
    for (int64_t i = b0; i < b1; ++i) {
      if (!slots[static_cast<size_t>(i)]) continue;
      const float p = std::exp(logits[i - b0] - new_max);
      block_sum += p;
      const float pb = flashdesk::round_bf16(p);
      for (int64_t e = 0; e < d; ++e) acc[e] += pb * slots[i][e];
    }
    denom = denom * rescale + block_sum;
    running_max = new_max;
  }
  if (!any) {
    std::fill(o, o + d, 0.0f);
    return;
  }
  denom += std::exp(sink - running_max);
  for (int64_t e = 0; e < d; ++e) o[e] = flashdesk::round_bf16(acc[e] / denom);
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
        // The official key list: W window slots, then the top-k columns (docs/numerics.md).
        std::vector<const float*> slots(static_cast<size_t>(w.window + k_cols));
        std::vector<float> entries(static_cast<size_t>(std::max<int64_t>(k_cols, 1) * d));
        std::vector<float> logits(kAttentionBlock), acc(static_cast<size_t>(d));
        for (int64_t t = begin; t < end; ++t) {
          const int64_t p = a.positions[static_cast<size_t>(t)];
          const int64_t first = std::max<int64_t>(0, p - w.window + 1);
          std::fill(slots.begin(), slots.end(), nullptr);
          for (int64_t pos = first; pos <= p; ++pos) {
            const size_t slot = static_cast<size_t>(pos - first);
            if (pos >= w.step_first_position) {
              FD_CHECK(pos - w.step_first_position < n_step,
                       "attention: query beyond the step's KV");
              slots[slot] = &step[(pos - w.step_first_position) * d];
            } else if (w.ring_positions[static_cast<size_t>(pos % w.window)] == pos) {
              slots[slot] = &ring[(pos % w.window) * d];
            }
          }
          for (int64_t c = 0; c < k_cols; ++c) {
            const int32_t j = a.topk->data<int32_t>()[t * k_cols + c];
            if (j < 0) continue;
            FD_CHECK(j < a.compressed.n_entries, "attention: top-k entry beyond the cache");
            float* e = &entries[static_cast<size_t>(c * d)];
            cpu::dequantize_kv_row(KvFormat::Fp4Entry, a.compressed.rows->bytes() + j * entry_bytes,
                                   d, e);
            slots[static_cast<size_t>(w.window + c)] = e;
          }
          for (int64_t h = 0; h < heads; ++h)
            attend_one_head(q.data<float>() + (t * heads + h) * d, slots, d, a.softmax_scale,
                            sink[h], logits, acc, out.data<float>() + (t * heads + h) * d);
        }
      });
}

}  // namespace flashdesk
