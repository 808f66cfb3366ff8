// Uploads the model's weights to a backend, taking this rank's slice of each tensor as the
// sharding table says, and hands back to the checkpoint the bytes the backend copied.
#include "engine/model/model_weights.h"

#include <array>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <string>

#include "engine/model/load_progress.h"

namespace flashdesk {
namespace {

// Whether `t`'s memory overlaps the checkpoint bytes of `v`: the backend kept a view of them
// instead of copying. Device addresses are compared as well: with unified addressing a device
// may reach host memory at its host address.
bool points_into(const Tensor& t, const TensorView& v) {
  if (!t.defined() || v.nbytes == 0) return false;
  const auto begin = reinterpret_cast<uintptr_t>(t.memory()->address());
  const auto end = begin + t.memory()->bytes();
  const auto v_begin = reinterpret_cast<uintptr_t>(v.data);
  return begin < v_begin + v.nbytes && v_begin < end;
}

class WeightLoader {
 public:
  WeightLoader(const Checkpoint& ckpt, Backend& backend, const ShardPlan& plan,
               LoadProgressTracker* progress)
      : ckpt_(ckpt), be_(backend), plan_(plan), text_(ckpt.config().text), progress_(progress) {}

  Tensor vec(const std::string& name) {
    TensorView v = ckpt_.tensor(name);
    Counted counted{this, v};
    Tensor out;
    if (shard_split(name) != ShardSplit::VectorByHead || plan_.world == 1) {
      out = be_.upload_f32(v);
    } else {
      const int64_t n = v.dim(0) / plan_.world;
      std::array<int64_t, 1> shape = {n};
      TensorView part = v;
      part.data = v.data + plan_.rank * n * static_cast<int64_t>(dtype_size(v.dtype));
      part.shape = shape;
      part.nbytes = static_cast<size_t>(n) * dtype_size(v.dtype);
      out = be_.upload_f32(part);
    }
    done_with(v, {&out});
    return out;
  }

  Tensor raw(const std::string& name) {
    TensorView v = ckpt_.tensor(name);
    Counted counted{this, v};
    Tensor out = be_.upload(v);
    done_with(v, {&out});
    return out;
  }
  // A table read a few rows a step: where the backend keeps such tables (upload_table).
  Tensor table(const std::string& name, const Checkpoint::DrawInto& draw = {}) {
    TensorView v = draw ? ckpt_.tensor_drawn(name, draw) : ckpt_.tensor(name);
    Counted counted{this, v};
    Tensor out = be_.upload_table(v);
    done_with(v, {&out});
    return out;
  }

  // An Engram table: `module` + ".weight" codes and ".scale" codes, where upload_table keeps
  // them. A synthetic checkpoint's are drawn by the backend where it can (draw_into_host) into
  // the checkpoint's memory, which every rank then shares.
  QuantTable quant_table(const std::string& module) {
    Checkpoint::DrawInto draw;
    if (const std::optional<RandomWeightRecipe> recipe = ckpt_.random_recipe(module + ".weight"))
      draw = [this, r = *recipe](uint8_t* w, uint8_t* s) { return be_.draw_into_host(r, w, s); };
    Tensor codes = table(module + ".weight", draw);
    return QuantTable{std::move(codes), table(module + ".scale")};
  }

  // `module` + ".weight" (+ ".scale" when quantised), sliced for this rank.
  LinearWeight linear(const std::string& module, bool in_host = false) {
    if (!in_host)
      if (LinearWeight drawn = draw(module); drawn.data.defined()) return drawn;
    TensorView w = ckpt_.tensor(module + ".weight");
    const bool has_scale = ckpt_.has(module + ".scale");
    TensorView s = has_scale ? ckpt_.tensor(module + ".scale") : TensorView{};
    Counted counted{this, w, has_scale ? &s : nullptr};
    const Take take = take_of(module + ".weight");
    LinearWeight lw;
    if (take == Take::Whole)
      lw = be_.upload_linear(w, has_scale ? &s : nullptr, in_host);
    else if (take == Take::Columns)
      lw = column_slice(w, has_scale ? &s : nullptr);
    else
      lw = row_slice(w, has_scale ? &s : nullptr);
    done_with(w, {&lw.data, &lw.scale});
    if (has_scale) done_with(s, {&lw.data, &lw.scale});
    return lw;
  }

  ExpertWeights expert(const std::string& prefix, bool in_host = false) {
    return {linear(prefix + "w1", in_host), linear(prefix + "w3", in_host),
            linear(prefix + "w2", in_host)};
  }

  const ShardPlan& plan() const { return plan_; }

 private:
  // Reports its tensors to the progress tracker when the upload that follows it has returned.
  struct Counted {
    WeightLoader* loader;
    const TensorView& first;
    const TensorView* second = nullptr;
    ~Counted() {
      if (!loader->progress_ || std::uncaught_exceptions() > 0) return;
      loader->progress_->uploaded(first);
      if (second) loader->progress_->uploaded(*second);
    }
  };

  // The linear drawn by the backend itself where the checkpoint generates it and the backend
  // can (Backend::draw_linear); this rank's rows, as linear() would slice them. Undefined data
  // otherwise (a file, a host backend, a column slice), and nothing generated on the host.
  LinearWeight draw(const std::string& module) {
    const std::optional<RandomWeightRecipe> recipe = ckpt_.random_recipe(module + ".weight");
    if (!recipe || recipe->format == RandomTensorPlan::Format::Fp8Rows) return {};
    const Take take = take_of(module + ".weight");
    if (take == Take::Columns) return {};
    const RowShare share =
        take == Take::Rows ? row_share(recipe->rows, recipe->weight) : RowShare{0, recipe->rows};
    LinearWeight lw = be_.draw_linear(*recipe, share.first, share.rows);
    if (lw.data.defined() && progress_) {
      progress_->uploaded(spec_view(recipe->weight));
      if (!recipe->scale.empty()) progress_->uploaded(spec_view(recipe->scale));
    }
    return lw;
  }

  // A view of the named tensor's name and size only (load progress counts bytes by name).
  TensorView spec_view(std::string_view name) const {
    const TensorSpec spec = ckpt_.tensor_spec(name);
    TensorView v;
    v.name = name;
    v.dtype = spec.dtype;
    v.nbytes = static_cast<size_t>(spec.nbytes());
    return v;
  }

  // Releases the checkpoint's bytes of `v` (Checkpoint::release_tensor) unless one of `kept`
  // points into them. A backend that copied (a GPU's upload, upload_f32's widening, a column
  // slice) lets a synthetic checkpoint free them; a view (the CPU backends' upload, a GPU's
  // upload_table and in-host experts) keeps them for the model's life. A GPU upload from pageable
  // memory has read its source when it returns (the CUDA backend's upload_f32 frees its own
  // staging vector right after, too).
  void done_with(const TensorView& v, std::initializer_list<const Tensor*> kept) {
    for (const Tensor* t : kept)
      if (points_into(*t, v)) return;
    ckpt_.release_tensor(v.name);
  }

  // How this rank takes a linear weight (the sharding table's split): whole, its share of the
  // output rows, or its share of the input columns.
  enum class Take : uint8_t { Whole, Rows, Columns };
  Take take_of(const std::string& weight) const {
    const ShardSplit split = shard_split(weight);
    if (plan_.world == 1 || split == ShardSplit::Replicated || split == ShardSplit::ExpertsByRank ||
        split == ShardSplit::FirstRankOnly)
      return Take::Whole;
    return split == ShardSplit::ColumnsByGroup ? Take::Columns : Take::Rows;
  }

  // This rank's contiguous share [first, first + rows) of `total` output rows (whole 32-row scale
  // tiles).
  struct RowShare {
    int64_t first = 0, rows = 0;
  };
  RowShare row_share(int64_t total, std::string_view name) const {
    const int64_t rows = total / plan_.world;
    FD_CHECK(total % plan_.world == 0 && rows % 32 == 0,
             std::string(name) + ": rows do not split into whole 32-row tiles");
    return {plan_.rank * rows, rows};
  }

  // This rank's share of the output rows, copied as stored.
  LinearWeight row_slice(const TensorView& w, const TensorView* s) {
    const auto [first, rows] = row_share(w.dim(0), w.name);
    std::array<int64_t, 2> wshape = {rows, w.dim(1)}, sshape = {0, 0};
    TensorView wp = w, sp;
    const size_t row_bytes = w.nbytes / static_cast<size_t>(w.dim(0));
    wp.data = w.data + static_cast<size_t>(first) * row_bytes;
    wp.shape = wshape;
    wp.nbytes = static_cast<size_t>(rows) * row_bytes;
    if (s) {
      sp = *s;
      sshape = {rows / 32, s->dim(1)};
      sp.data = s->data + static_cast<size_t>(first / 32) * static_cast<size_t>(s->dim(1));
      sp.shape = sshape;
      sp.nbytes = static_cast<size_t>(sshape[0] * sshape[1]);
    }
    return be_.upload_linear(wp, s ? &sp : nullptr);
  }

  // This rank's share of the input columns, copied (not contiguous in the file).
  LinearWeight column_slice(const TensorView& w, const TensorView* s) {
    const int64_t cols = w.dim(1) / plan_.world, first = plan_.rank * cols;
    FD_CHECK(w.dtype == DType::F8_E4M3 && s && w.dim(1) % plan_.world == 0 && cols % 32 == 0,
             std::string(w.name) + ": columns do not split into whole 32-column tiles");
    LinearWeight lw;
    lw.format = WeightFormat::Fp8Block;
    lw.name = std::string(w.name);
    lw.out = w.dim(0);
    lw.in = cols;
    lw.data = copy_columns(w.data, w.dim(0), w.dim(1), first, cols, DType::F8_E4M3);
    lw.scale = copy_columns(s->data, s->dim(0), s->dim(1), first / 32, cols / 32, DType::F8_E8M0);
    return lw;
  }

  Tensor copy_columns(const uint8_t* src, int64_t rows, int64_t cols, int64_t first, int64_t n,
                      DType dtype) {
    std::vector<uint8_t> buf(static_cast<size_t>(rows * n));
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(&buf[static_cast<size_t>(r * n)], src + r * cols + first, static_cast<size_t>(n));
    Tensor t = be_.alloc(dtype, Shape{rows, n});
    be_.write(t, buf.data(), buf.size());
    return t;
  }

  const Checkpoint& ckpt_;
  Backend& be_;
  ShardPlan plan_;
  const TextConfig& text_;
  LoadProgressTracker* progress_;
};

AttentionWeights load_attention(WeightLoader& ld, const std::string& p, const LayerRole& role) {
  AttentionWeights a;
  a.wq_a = ld.linear(p + "attn.wq_a");
  a.q_norm = ld.vec(p + "attn.q_norm.weight");
  a.wq_b = ld.linear(p + "attn.wq_b");
  a.wkv = ld.linear(p + "attn.wkv");
  a.kv_norm = ld.vec(p + "attn.kv_norm.weight");
  a.wo_a = ld.linear(p + "attn.wo_a");
  a.wo_b = ld.linear(p + "attn.wo_b");
  a.sink = ld.vec(p + "attn.attn_sink");
  const bool kv_source = role.kv_source == role.layer && role.compress_ratio > 0;
  if (kv_source) {
    CompressorWeights c;
    c.wkv = ld.linear(p + "attn.compressor.wkv");
    if (role.compress_ratio > 1) c.wgate = ld.linear(p + "attn.compressor.wgate");
    c.norm = ld.vec(p + "attn.compressor.norm.weight");
    c.index_wk = ld.linear(p + "attn.indexer.wk");
    c.index_k_norm = ld.vec(p + "attn.indexer.k_norm.weight");
    a.compressor = std::move(c);
  }
  if (role.compress_ratio > 0 && role.index_source == role.layer)
    a.indexer = IndexerWeights{ld.linear(p + "attn.indexer.wq_b"),
                               ld.linear(p + "attn.indexer.weights_proj")};
  return a;
}

// host_experts: the routed experts stay in host memory (a device backend computes them on the
// CPU); the gate and the shared expert go where the rest of the layer goes.
MoeWeights load_moe(WeightLoader& ld, const std::string& p, const TextConfig& t, bool host_experts,
                    int64_t n_experts) {
  MoeWeights m;
  m.gate = ld.linear(p + "ffn.gate");
  m.bias = ld.vec(p + "ffn.gate.bias");
  m.bias_vl = ld.vec(p + "ffn.gate.bias_vl");
  const int64_t E = n_experts, world = ld.plan().world, rank = ld.plan().rank;
  const int64_t first = rank * E / world, last = (rank + 1) * E / world;
  m.local_experts.reserve(static_cast<size_t>(last - first));  // pointers below stay valid
  m.experts.assign(static_cast<size_t>(E), nullptr);
  for (int64_t e = first; e < last; ++e) {
    m.local_experts.push_back(
        ld.expert(p + "ffn.experts." + std::to_string(e) + ".", host_experts));
    m.experts[static_cast<size_t>(e)] = &m.local_experts.back();
  }
  if (t.n_shared_experts > 0 && rank == 0) m.shared = ld.expert(p + "ffn.shared_experts.");
  return m;
}

LayerWeights load_block(WeightLoader& ld, const std::string& p, const LayerRole& role,
                        const TextConfig& t, bool host_experts, int64_t n_experts) {
  LayerWeights L;
  L.attn_norm = ld.vec(p + "attn_norm.weight");
  L.ffn_norm = ld.vec(p + "ffn_norm.weight");
  L.hc_attn = {ld.vec(p + "hc_attn_fn"), ld.vec(p + "hc_attn_base"), ld.vec(p + "hc_attn_scale")};
  L.hc_ffn = {ld.vec(p + "hc_ffn_fn"), ld.vec(p + "hc_ffn_base"), ld.vec(p + "hc_ffn_scale")};
  L.attn = load_attention(ld, p, role);
  L.ffn = load_moe(ld, p, t, host_experts, n_experts);
  return L;
}

DsparkWeights load_dspark(WeightLoader& ld, const TextConfig& t) {
  DsparkWeights d;
  d.main_proj = ld.linear("mtp.0.main_proj");
  d.main_norm = ld.vec("mtp.0.main_norm.weight");
  const int64_t stages = dspark_stages(t);
  for (int64_t m = 0; m < stages; ++m) {
    LayerRole window_only;  // compress ratio 0: no compressor, no indexer
    window_only.layer = t.num_hidden_layers + m;
    d.stages.push_back(load_block(ld, "mtp." + std::to_string(m) + ".", window_only, t, false,
                                  t.dspark_n_routed_experts));
  }
  const std::string last = "mtp." + std::to_string(stages - 1) + ".";
  d.norm = ld.vec(last + "norm.weight");
  d.markov_embed = ld.raw(last + "markov_head.embed.weight");
  d.markov_head = ld.linear(last + "markov_head.head");
  d.confidence = ld.linear(last + "confidence_head.proj");
  return d;
}

}  // namespace

ModelWeights load_model_weights(const Checkpoint& ckpt, const std::vector<LayerRole>& roles,
                                Backend& backend, const ShardPlan& plan,
                                LoadProgressTracker* progress, int64_t host_experts_from) {
  const TextConfig& t = ckpt.config().text;
  WeightLoader ld(ckpt, backend, plan, progress);
  ModelWeights w;
  w.embed = ld.raw("embed.weight");
  w.head = ld.linear(t.tie_word_embeddings ? "embed" : "head");
  w.norm = ld.vec("norm.weight");
  for (const LayerRole& role : roles) {
    const std::string p = "layers." + std::to_string(role.layer) + ".";
    LayerWeights L =
        load_block(ld, p, role, t, host_experts_from >= 0 && role.layer >= host_experts_from,
                   t.n_routed_experts);
    if (role.engram) {
      EngramWeights e;
      e.table = ld.quant_table(p + "engram.embed");
      e.wkv = ld.linear(p + "engram.wkv");
      e.q_weight = ld.vec(p + "engram.q_weight");
      e.k_weight = ld.vec(p + "engram.k_weight");
      L.engram = std::move(e);
    }
    w.layers.push_back(std::move(L));
  }
  // The draft runs on one device for now: its tensors are not in the sharding table.
  if (dspark_stages(t) > 0 && plan.world == 1 && ckpt.has("mtp.0.main_proj.weight"))
    w.dspark = load_dspark(ld, t);
  return w;
}

}  // namespace flashdesk
