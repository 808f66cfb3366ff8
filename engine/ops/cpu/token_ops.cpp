// Tokens chosen on the CPU reference backend (backend.h "tokens chosen on the backend"): embedding
// rows at ids held in a tensor, a bias added and the argmax taken, two row blocks joined by
// columns. The optimised CPU backend inherits them: they are a draft's few rows.
#include <cstring>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/kernels.h"

namespace flashdesk {

void CpuReferenceBackend::embed_rows(const Tensor& table, const Tensor& ids, Tensor& rows) {
  check_embed_rows_args(table, ids, rows);
  const int64_t vocab = table.dim(0), d = table.dim(1), n = ids.dim(0);
  const uint8_t* t = table.bytes();
  float* r = rows.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids.data<int32_t>()[i];
    FD_CHECK(id >= 0 && id < vocab, "embed_rows: token id out of range");
    for (int64_t j = 0; j < d; ++j) r[i * d + j] = cpu::load_bf16(t + 2 * (id * d + j));
  }
}

void CpuReferenceBackend::add_argmax(Tensor& x, const Tensor& bias, Tensor& ids) {
  check_add_argmax_args(x, bias, ids);
  const int64_t n = x.dim(0), V = x.dim(1);
  for (int64_t i = 0; i < n; ++i) {
    float* row = x.data<float>() + i * V;
    const float* b = bias.data<float>() + i * V;
    for (int64_t v = 0; v < V; ++v) row[v] += b[v];
    // std::max_element's rule, written out: the kernels of other backends mirror this loop.
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[best] < row[v]) best = v;
    ids.data<int32_t>()[i] = static_cast<int32_t>(best);
  }
}

void CpuReferenceBackend::concat_columns(const Tensor& left, const Tensor& right, Tensor& out) {
  check_concat_columns_args(left, right, out);
  const size_t a = static_cast<size_t>(left.dim(1)) * 4, b = static_cast<size_t>(right.dim(1)) * 4;
  for (int64_t i = 0; i < left.rows(); ++i) {
    uint8_t* o = out.bytes() + static_cast<size_t>(i) * (a + b);
    std::memcpy(o, left.bytes() + static_cast<size_t>(i) * a, a);
    std::memcpy(o + a, right.bytes() + static_cast<size_t>(i) * b, b);
  }
}

}  // namespace flashdesk
