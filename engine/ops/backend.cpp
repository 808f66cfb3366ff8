// The backend-independent parts of the interface: zero-filled allocation and the format rules
// of linear weights.
#include "engine/ops/backend.h"

#include <string>
#include <vector>

namespace flashdesk {

Tensor Backend::zeros(DType dtype, Shape shape) {
  Tensor t = alloc(dtype, shape);
  fill_zero(t);
  return t;
}

void Backend::hc_collapse_norm(const Tensor& X, const Tensor& pre, const Tensor& norm, float eps,
                               Tensor& u) {
  hc_collapse(X, pre, u);
  rms_norm(u, &norm, eps, u);
}

void Backend::hc_expand_collapse_norm(const Tensor& X, const Tensor& y, const Tensor& post,
                                      const Tensor& comb, const Tensor& pre, const Tensor& norm,
                                      float eps, Tensor& out, Tensor& u) {
  hc_expand(X, y, post, comb, out);
  hc_collapse_norm(out, pre, norm, eps, u);
}

void Backend::sparse_attention_unrotated(const AttentionArgs& args, std::span<const float> inv_freq,
                                         Tensor& out) {
  sparse_attention(args, out);
  rope(out, out.dim(out.shape().rank() - 1), args.positions, inv_freq, true);
}

void Backend::rope_quantize_rows(Tensor& x, const Tensor* norm, float eps,
                                 std::span<const int64_t> positions,
                                 std::span<const float> inv_freq, KvFormat format, Tensor& dst,
                                 int64_t first_row) {
  if (norm) rms_norm(x, norm, eps, x);
  rope(x, x.shape().row_numel(), positions, inv_freq, false);
  quantize_rows(format, x, dst, first_row);
}

void Backend::moe_experts_rounded(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                  std::span<const ExpertWeights* const> experts,
                                  const ExpertWeights* shared, float swiglu_limit, Tensor& y) {
  moe_experts(x, ids, weights, experts, shared, swiglu_limit, y);
  round_bf16(y);
}

void Backend::moe_shared_expert(const Tensor& x, const ExpertWeights& shared, float swiglu_limit,
                                Tensor& y) {
  // One routed slot a row whose expert lives elsewhere (skipped): y = the shared term.
  const int64_t n = x.rows();
  const Tensor ids = zeros(DType::I32, Shape{n, 1}), weights = zeros(DType::F32, Shape{n, 1});
  const std::vector<const ExpertWeights*> none(1, nullptr);
  moe_experts(x, ids, weights, none, &shared, swiglu_limit, y);
}

void Backend::moe_routed_experts_plus(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                      std::span<const ExpertWeights* const> experts,
                                      const Tensor& shared_y, float swiglu_limit, Tensor& y) {
  FD_CHECK(shared_y.shape() == y.shape() && shared_y.dtype() == DType::F32,
           "moe: the shared term must be F32 of the output's shape");
  moe_experts(x, ids, weights, experts, nullptr, swiglu_limit, y);
  std::vector<float> routed(static_cast<size_t>(y.numel())), term(routed.size());
  read(y, routed.data(), routed.size() * sizeof(float));
  read(shared_y, term.data(), term.size() * sizeof(float));
  for (size_t i = 0; i < routed.size(); ++i) routed[i] += term[i];
  write(y, routed.data(), routed.size() * sizeof(float));
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

void expect_scale_shape(const TensorView& scale, int64_t rows, int64_t cols, const std::string& w) {
  FD_CHECK(scale.dtype == DType::F8_E8M0 && scale.shape.size() == 2 && scale.dim(0) == rows &&
               scale.dim(1) == cols,
           "scale of " + w + " must be F8_E8M0 [" + std::to_string(rows) + ", " +
               std::to_string(cols) + "]");
}

}  // namespace

void check_indexer_args(const IndexerArgs& a, const Tensor& topk) {
  const Tensor& q = *a.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2), E = a.keys.n_entries;
  check_shape(*a.weights, Shape{n, heads}, "indexer weights");
  FD_CHECK(static_cast<int64_t>(a.n_visible.size()) == n, "indexer: one n_visible per row");
  FD_CHECK(topk.rows() == n && topk.dtype() == DType::I32, "indexer: topk " + topk.shape().str());
  FD_CHECK(E == 0 || (a.keys.rows && a.keys.rows->dim(1) == kv_row_bytes(KvFormat::Fp4Key, d) &&
                      a.keys.rows->dim(0) >= E),
           "indexer: key cache does not match the query head dim");
  FD_CHECK(d % 32 == 0, "indexer: head dim must be a multiple of 32");
  if (a.restrict_blocks) FD_CHECK(a.restrict_blocks->rows() == n, "indexer: restriction rows");
  FD_CHECK(a.select_width == 0 || a.select_width >= E, "indexer: select_width below the entries");
}

void check_hc_mix_args(const Tensor& X, const HcParams& p, const HcSettings& s, const Tensor& pre,
                       const Tensor& post, const Tensor& comb) {
  const int64_t n = X.rows(), hc = s.hc, flat = X.shape().row_numel();
  const int64_t n_mix = (2 + hc) * hc;
  check_shape(p.fn, Shape{n_mix, flat}, "hc fn");
  check_shape(p.base, Shape{n_mix}, "hc base");
  check_shape(p.scale, Shape{3}, "hc scale");
  check_shape(pre, Shape{n, hc}, "hc pre");
  check_shape(post, Shape{n, hc}, "hc post");
  check_shape(comb, Shape{n, hc, hc}, "hc comb");
}

void check_embed_rows_args(const Tensor& table, const Tensor& ids, const Tensor& rows) {
  check_dtype(table, DType::BF16, "embed_rows table");
  check_dtype(ids, DType::I32, "embed_rows ids");
  FD_CHECK(ids.shape().rank() == 1, "embed_rows: ids " + ids.shape().str() + " must be [n]");
  check_shape(rows, Shape{ids.dim(0), table.dim(1)}, "embed_rows rows");
  check_dtype(rows, DType::F32, "embed_rows rows");
}

void check_add_argmax_args(const Tensor& x, const Tensor& bias, const Tensor& ids) {
  FD_CHECK(x.shape().rank() == 2 && x.dim(1) > 0, "add_argmax: x " + x.shape().str());
  check_dtype(x, DType::F32, "add_argmax x");
  check_shape(bias, x.shape(), "add_argmax bias");
  check_dtype(bias, DType::F32, "add_argmax bias");
  check_shape(ids, Shape{x.dim(0)}, "add_argmax ids");
  check_dtype(ids, DType::I32, "add_argmax ids");
}

void check_concat_columns_args(const Tensor& left, const Tensor& right, const Tensor& out) {
  const int64_t n = left.rows();
  FD_CHECK(left.shape().rank() == 2 && right.shape().rank() == 2 && right.rows() == n,
           "concat_columns: left " + left.shape().str() + ", right " + right.shape().str());
  check_shape(out, Shape{n, left.dim(1) + right.dim(1)}, "concat_columns out");
  FD_CHECK(
      left.dtype() == out.dtype() && right.dtype() == out.dtype() && dtype_size(out.dtype()) == 4,
      "concat_columns: left, right and out must share a 4-byte dtype");
}

void check_engram_gather_args(const QuantTable& table, std::span<const int64_t> ids,
                              const Tensor& e) {
  const int64_t width = table.width(), rows = table.rows();
  check_shape(table.scales, Shape{rows, width / 32}, "engram table scales");
  FD_CHECK(e.shape().rank() == 2 && width > 0 && e.dim(1) % width == 0 &&
               static_cast<int64_t>(ids.size()) == e.dim(0) * (e.dim(1) / width),
           "engram: gathered rows " + e.shape().str() + " do not hold " +
               std::to_string(ids.size()) + " table rows of width " + std::to_string(width));
}

void check_attention_args(const AttentionArgs& a, const Tensor& out) {
  const Tensor& q = *a.q;
  const int64_t n = q.rows(), heads = q.dim(1), d = q.dim(2);
  check_shape(out, q.shape(), "attention out");
  check_shape(*a.sink, Shape{heads}, "attention sink");
  FD_CHECK(static_cast<int64_t>(a.positions.size()) == n, "attention: one position per row");
  const WindowKv& w = a.window;
  FD_CHECK(w.window > 0 && w.ring && static_cast<int64_t>(w.ring_positions.size()) == w.window &&
               w.ring->rows() == w.window,
           "attention: ring must have W slots");
  const int64_t win_bytes = kv_row_bytes(KvFormat::Fp8Window, d);
  FD_CHECK(w.ring->dim(1) == win_bytes, "attention: window row size");
  if (w.step && w.step->rows() > 0)
    FD_CHECK(w.step->dim(1) == win_bytes, "attention: window row size");
  if (a.topk) {
    FD_CHECK(a.topk->rows() == n && a.compressed.rows, "attention: top-k without entries");
    FD_CHECK(a.compressed.rows->dim(1) == kv_row_bytes(KvFormat::Fp4Entry, d),
             "attention: entry row size");
  }
}

LinearWeight Backend::upload_linear(const TensorView& w, const TensorView* scale, bool in_host) {
  LinearWeight lw;
  lw.name = std::string(w.name);
  FD_CHECK(w.shape.size() == 2, lw.name + ": a linear weight is 2-D");
  lw.out = w.dim(0);
  switch (w.dtype) {
    case DType::F8_E4M3:
      lw.format = WeightFormat::Fp8Block;
      lw.in = w.dim(1);
      FD_CHECK(scale != nullptr, lw.name + ": FP8 weight without scale");
      expect_scale_shape(*scale, ceil_div(lw.out, lw.block), ceil_div(lw.in, lw.block), lw.name);
      break;
    case DType::I8:
      lw.format = WeightFormat::Fp4Row;
      lw.in = w.dim(1) * 2;
      FD_CHECK(scale != nullptr, lw.name + ": FP4 weight without scale");
      FD_CHECK(lw.in % lw.block == 0, lw.name + ": FP4 K must be a multiple of 32");
      expect_scale_shape(*scale, lw.out, lw.in / lw.block, lw.name);
      break;
    case DType::BF16:
      lw.format = WeightFormat::Bf16;
      lw.in = w.dim(1);
      break;
    case DType::F32:
      lw.format = WeightFormat::F32;
      lw.in = w.dim(1);
      break;
    default:
      FD_CHECK(false,
               lw.name + ": unsupported linear weight dtype " + std::string(dtype_name(w.dtype)));
  }
  lw.data = in_host ? mapped_host_tensor(w) : upload(w);
  if (scale != nullptr && lw.format != WeightFormat::Bf16 && lw.format != WeightFormat::F32)
    lw.scale = in_host ? mapped_host_tensor(*scale) : upload(*scale);
  return lw;
}

}  // namespace flashdesk
