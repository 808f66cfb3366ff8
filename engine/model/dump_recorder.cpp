// Assembles the dump tensors of docs/logits-dump.md row by row from the observer hooks.
#include "engine/model/dump_recorder.h"

#include <algorithm>
#include <cstring>

namespace flashdesk {
namespace {

std::string layer_name(const std::string& base, int64_t layer) {
  return base + ".layer" + std::to_string(layer);
}

int64_t engram_index(const TextConfig& t, int64_t layer) {
  const auto& ids = t.engram_layer_ids;
  return std::find(ids.begin(), ids.end(), layer) - ids.begin();
}

}  // namespace

DumpRecorder::DumpRecorder(const Model& model, std::string prefix, int64_t rows, int64_t steps,
                           int64_t first_position)
    : model_(model),
      prefix_(std::move(prefix)),
      rows_(rows),
      steps_(steps),
      first_position_(first_position) {}

HostTensor& DumpRecorder::tensor(const std::string& name, DType dtype, std::vector<int64_t> outer,
                                 std::vector<int64_t> inner, double fill) {
  auto it = out_.find(prefix_ + name);
  if (it != out_.end()) return it->second;
  std::vector<int64_t> shape;
  if (steps_ > 0) shape.push_back(steps_);
  shape.insert(shape.end(), outer.begin(), outer.end());
  shape.push_back(rows_);
  shape.insert(shape.end(), inner.begin(), inner.end());
  HostTensor t = HostTensor::zeros(dtype, shape);
  if (fill != 0) {
    FD_CHECK(dtype == DType::I64, "only I64 dump tensors start non-zero");
    std::fill(t.as<int64_t>().begin(), t.as<int64_t>().end(), static_cast<int64_t>(fill));
  }
  return out_.emplace(prefix_ + name, std::move(t)).first->second;
}

size_t DumpRecorder::row_offset(const HostTensor& t, int64_t n_outer, int64_t outer,
                                int64_t row) const {
  // shape = [T?] + [n_outer?] + [rows] + inner dims.
  const int64_t steps = steps_ > 0 ? steps_ : 1, outers = std::max<int64_t>(1, n_outer);
  const int64_t inner = t.numel() / (steps * outers * rows_);
  FD_CHECK(inner * steps * outers * rows_ == t.numel(), "dump tensor shape does not fit its rows");
  const int64_t step = steps_ > 0 ? step_ : 0;
  return static_cast<size_t>(((step * outers + outer) * rows_ + row) * inner) * dtype_size(t.dtype);
}

int64_t DumpRecorder::row_of(const RowInfo& r) const {
  const int64_t row = r.position - first_position_ - (steps_ > 0 ? step_ : 0);
  FD_CHECK(row >= 0 && row < rows_, "dump: position outside the recorded rows");
  return row;
}

void DumpRecorder::put_rows(HostTensor& dst, int64_t n_outer, int64_t outer,
                            std::span<const RowInfo> rows, const HostTensor& src) {
  const size_t row_bytes = src.bytes.size() / std::max<size_t>(1, rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(dst.bytes.data() + row_offset(dst, n_outer, outer, row_of(rows[i])),
                src.bytes.data() + i * row_bytes, row_bytes);
}

void DumpRecorder::on_embed(std::span<const RowInfo> rows, const HostTensor& t) {
  put_rows(tensor("embed", DType::F32, {}, {t.shape[1]}), 0, 0, rows, t);
}

void DumpRecorder::on_engram(int64_t layer, std::span<const RowInfo> rows, const HostTensor& ids,
                             const HostTensor& streams) {
  const TextConfig& text = model_.config().text;
  put_rows(
      tensor(layer_name("engram_out", layer), DType::F32, {}, {streams.shape[1], streams.shape[2]}),
      0, 0, rows, streams);
  const int64_t n_eng = static_cast<int64_t>(text.engram_layer_ids.size()), cols = ids.shape[1];
  HostTensor& dst = tensor("engram_hash_ids", DType::I64, {}, {n_eng, cols});
  const int64_t li = engram_index(text, layer);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(dst.bytes.data() + row_offset(dst, 0, 0, row_of(rows[i])) +
                    static_cast<size_t>(li * cols) * 8,
                ids.bytes.data() + i * static_cast<size_t>(cols) * 8,
                static_cast<size_t>(cols) * 8);
}

void DumpRecorder::on_attn_out(int64_t layer, std::span<const RowInfo> rows, const HostTensor& t) {
  const int64_t L = model_.config().text.num_hidden_layers;
  put_rows(tensor("attn_out", DType::F32, {L}, {t.shape[1]}), L, layer, rows, t);
}

void DumpRecorder::on_layer_tensor(int64_t layer, std::string_view kind,
                                   std::span<const RowInfo> rows, const HostTensor& t) {
  const int64_t L = model_.config().text.num_hidden_layers;
  const std::vector<int64_t> inner(t.shape.begin() + 1, t.shape.end());
  put_rows(tensor(std::string(kind), DType::F32, {L}, inner), L, layer, rows, t);
}

void DumpRecorder::on_ffn_out(int64_t layer, std::span<const RowInfo> rows, const HostTensor& t) {
  const int64_t L = model_.config().text.num_hidden_layers;
  put_rows(tensor("ffn_out", DType::F32, {L}, {t.shape[1]}), L, layer, rows, t);
}

void DumpRecorder::on_experts(int64_t layer, std::span<const RowInfo> rows, const HostTensor& ids,
                              const HostTensor& weights) {
  const int64_t L = model_.config().text.num_hidden_layers, k = ids.shape[1];
  HostTensor ids64 = HostTensor::zeros(DType::I64, ids.shape);
  std::copy(ids.as<int32_t>().begin(), ids.as<int32_t>().end(), ids64.as<int64_t>().begin());
  put_rows(tensor("expert_ids", DType::I64, {L}, {k}), L, layer, rows, ids64);
  put_rows(tensor("expert_weights", DType::F32, {L}, {k}), L, layer, rows, weights);
}

void DumpRecorder::on_topk(int64_t layer, std::span<const RowInfo> rows, const HostTensor& t) {
  const TextConfig& text = model_.config().text;
  const int64_t K = text.index_topk, k = t.shape[1];
  // Published as the reference: entry + window offset (prefill: P, decode: W), -1 = none.
  const int64_t offset = steps_ > 0 ? text.sliding_window : rows_;
  HostTensor wide = HostTensor::zeros(DType::I64, {static_cast<int64_t>(rows.size()), K});
  auto w = wide.as<int64_t>();
  std::fill(w.begin(), w.end(), -1);
  const auto src = t.as<int32_t>();
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t c = 0; c < k; ++c) {
      const int32_t e = src[i * static_cast<size_t>(k) + static_cast<size_t>(c)];
      w[i * static_cast<size_t>(K) + static_cast<size_t>(c)] = e < 0 ? -1 : e + offset;
    }
  put_rows(tensor(layer_name("topk_idxs", layer), DType::I64, {}, {K}, -1), 0, 0, rows, wide);
}

void DumpRecorder::on_candidates(int64_t layer, std::span<const RowInfo> rows,
                                 const HostTensor& blocks, int64_t block_size, int64_t n_entries) {
  CandidateRows& c = candidates_[layer];
  c.block_size = block_size;
  const int64_t cols = blocks.shape[1];
  const auto b = blocks.as<int32_t>();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<int32_t> list(b.begin() + static_cast<int64_t>(i) * cols,
                              b.begin() + static_cast<int64_t>(i + 1) * cols);
    c.rows[{steps_ > 0 ? step_ : 0, row_of(rows[i])}] = {std::move(list), n_entries};
  }
}

void DumpRecorder::finish(const std::map<int64_t, int64_t>& final_entries) {
  for (const auto& [layer, c] : candidates_) {
    const int64_t E = final_entries.at(layer);
    HostTensor& dst = tensor(layer_name("candidates", layer), DType::U8, {}, {E});
    for (const auto& [key, value] : c.rows) {
      const auto& [blocks, n_entries] = value;
      const int64_t saved = step_;
      step_ = key.first;
      uint8_t* row = dst.bytes.data() + row_offset(dst, 0, 0, key.second);
      step_ = saved;
      for (int32_t blk : blocks) {
        if (blk < 0) continue;
        const int64_t end = std::min({(blk + 1) * c.block_size, n_entries, E});
        for (int64_t e = blk * c.block_size; e < end; ++e) row[e] = 1;
      }
    }
  }
}

void DumpRecorder::on_block_out(int64_t layer, std::span<const RowInfo> rows, const HostTensor& X,
                                const HostTensor& pre) {
  const int64_t L = model_.config().text.num_hidden_layers;
  put_rows(tensor("block_out", DType::F32, {L}, {X.shape[1], X.shape[2]}), L, layer, rows, X);
  put_rows(tensor("block_pre_mix", DType::F32, {L}, {pre.shape[1]}), L, layer, rows, pre);
  if (steps_ > 0) return;
  HostTensor& run = tensor("positions_run", DType::U8, {L}, {});
  for (const RowInfo& r : rows) run.bytes[row_offset(run, L, layer, row_of(r))] = 1;
}

const HostTensor& DumpRecorder::input(const std::string& name, int64_t n_outer,
                                      std::vector<int64_t> inner) const {
  auto it = inputs_->find(prefix_ + name);
  if (it == inputs_->end())
    throw FormatError("", "block inputs: tensor " + prefix_ + name + " is missing");
  std::vector<int64_t> want;
  if (steps_ > 0) want.push_back(steps_);
  if (n_outer > 0) want.push_back(n_outer);
  want.push_back(rows_);
  want.insert(want.end(), inner.begin(), inner.end());
  if (it->second.dtype != DType::F32 || it->second.shape != want)
    throw FormatError("", "block inputs: tensor " + prefix_ + name +
                              " does not have the F32 shape this run needs");
  return it->second;
}

void DumpRecorder::override_block_input(int64_t layer, std::span<const RowInfo> rows, HostTensor& X,
                                        HostTensor& pre) {
  const int64_t hc = X.shape[1], D = X.shape[2];
  auto x = X.as<float>();
  auto p = pre.as<float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t row = row_of(rows[i]);
    float* xr = x.data() + i * static_cast<size_t>(hc * D);
    float* pr = p.data() + i * static_cast<size_t>(hc);
    if (layer == 0) {
      const HostTensor& e = input("embed", 0, {D});
      const float* src = reinterpret_cast<const float*>(e.bytes.data() + row_offset(e, 0, 0, row));
      for (int64_t k = 0; k < hc; ++k) std::memcpy(xr + k * D, src, static_cast<size_t>(D) * 4);
      std::fill(pr, pr + hc, 0.0f);
      pr[0] = 1.0f;
      continue;
    }
    const int64_t L = model_.config().text.num_hidden_layers;
    const HostTensor& bo = input("block_out", L, {hc, D});
    const HostTensor& bp = input("block_pre_mix", L, {hc});
    std::memcpy(xr, bo.bytes.data() + row_offset(bo, L, layer - 1, row),
                static_cast<size_t>(hc * D) * 4);
    std::memcpy(pr, bp.bytes.data() + row_offset(bp, L, layer - 1, row),
                static_cast<size_t>(hc) * 4);
  }
}

}  // namespace flashdesk
