// The MoE sublayer (docs/model-spec.md §5) and the Engram update of the streams (§7).
#include <algorithm>

#include "engine/model/engram_hash.h"
#include "engine/model/step_runner.h"

namespace flashdesk {

Tensor StepRunner::moe(int64_t layer, const Tensor& x) {
  const MoeWeights& M = w_.layers[static_cast<size_t>(layer)].ffn;
  const int64_t n = n_rows_, E = text_.n_routed_experts, k = text_.num_experts_per_tok;
  const float limit = static_cast<float>(text_.swiglu_limit);
  // The shared expert's term beside the gate and the router where the backend gains from it
  // (Backend::shared_expert_beside_router): it does not depend on the routing.
  const bool ahead = M.shared && be_.shared_expert_beside_router(*M.shared, n);
  Tensor shared_y;
  Backend::Beside shared_done;
  if (ahead) {
    shared_y = f32(Shape{n, text_.hidden_size});
    be_.beside_begin();
    be_.moe_shared_expert(x, *M.shared, limit, shared_y);
    shared_done = be_.beside_end();
  }
  Tensor logits = f32(Shape{n, E});
  be_.linear(x, M.gate, kF32Linear, logits);
  Tensor ids = be_.alloc(DType::I32, Shape{n, k}), weights = f32(Shape{n, k});
  const RouteSettings rs{k, static_cast<float>(text_.gate_temp),
                         static_cast<float>(text_.routed_scaling_factor), text_.norm_topk_prob};
  const std::vector<uint8_t> image = image_rows();
  be_.moe_route(logits, M.bias, M.bias_vl.defined() ? &M.bias_vl : nullptr, image, rs, ids,
                weights);
  if (obs_) obs_->on_experts(layer, rows_, to_host(ids), to_host(weights));
  Tensor y = f32(Shape{n, text_.hidden_size});
  const ExpertWeights* shared = M.shared ? &*M.shared : nullptr;
  if (ahead) {
    be_.join(shared_done);
    be_.moe_routed_experts_plus(x, ids, weights, M.experts, shared_y, limit, y);
  } else if (model_.comm_->world() == 1) {
    // Nothing to reduce: the backend rounds the sums where it makes them.
    be_.moe_experts_rounded(x, ids, weights, M.experts, shared, limit, y);
    return y;
  } else {
    be_.moe_experts(x, ids, weights, M.experts, shared, limit, y);
  }
  all_reduce_and_round(y);
  return y;
}

HostTensor StepRunner::engram_ids(int64_t layer, std::vector<uint8_t>& masked) const {
  const EngramHasher& hasher = *model_.engram_;
  const auto& ids_of = text_.engram_layer_ids;
  const int64_t li = std::find(ids_of.begin(), ids_of.end(), layer) - ids_of.begin();
  const int64_t n = n_rows_, cols = hasher.columns();
  HostTensor ids = HostTensor::zeros(DType::I64, {n, cols});
  masked.assign(static_cast<size_t>(n), 0);
  for (const SeqRows& s : seqs_) {
    const SequenceState& st = *s.state;
    hasher.hash(li, st.tokens, st.dead, positions(s),
                ids.as<int64_t>().data() + s.first_row * cols);
    for (int64_t j = 0; j < s.n_rows; ++j)
      masked[static_cast<size_t>(s.first_row + j)] =
          st.dead[static_cast<size_t>(s.first_position + j)];
  }
  return ids;
}

void StepRunner::prefetch_engram() {
  if (!model_.engram_) return;
  be_.beside_begin();
  try {
    std::vector<uint8_t> masked;
    for (int64_t layer : text_.engram_layer_ids) {
      const auto& weights = w_.layers[static_cast<size_t>(layer)].engram;
      if (!weights) continue;
      EngramAhead& a = engram_ahead_[layer];
      a.ids = engram_ids(layer, masked);
      a.rows = f32(Shape{n_rows_, a.ids.shape[1] * weights->table.width()});
      be_.engram_gather(weights->table, a.ids.as<int64_t>(), a.rows);
    }
  } catch (...) {
    be_.join(be_.beside_end());
    engram_ahead_.clear();
    throw;
  }
  engram_upload_ = be_.beside_end();
}

void StepRunner::settle_engram_ahead() {
  be_.join(engram_upload_);
  engram_upload_ = Backend::Beside{};
  engram_ahead_.clear();
}

void StepRunner::engram(int64_t layer) {
  const EngramWeights& G = *w_.layers[static_cast<size_t>(layer)].engram;
  std::vector<uint8_t> masked;
  const HostTensor ids = engram_ids(layer, masked);
  const int64_t n = n_rows_, cols = ids.shape[1];
  Tensor e;
  const auto ahead = engram_ahead_.find(layer);
  if (ahead != engram_ahead_.end()) {
    if (ahead->second.ids.shape == ids.shape && ahead->second.ids.bytes == ids.bytes) {
      be_.join(engram_upload_);
      e = std::move(ahead->second.rows);
    }
    engram_ahead_.erase(ahead);
  }
  if (!e.defined()) {
    e = f32(Shape{n, cols * G.table.width()});
    be_.engram_gather(G.table, ids.as<int64_t>(), e);
  }
  Tensor kv = f32(Shape{n, G.wkv.out});
  be_.linear(e, G.wkv, kQuantLinear, kv);
  be_.engram_update(X_, kv, G.q_weight, G.k_weight, masked, static_cast<float>(text_.rms_norm_eps));
  if (obs_) obs_->on_engram(layer, rows_, ids, streams_to_host(X_));
}

}  // namespace flashdesk
