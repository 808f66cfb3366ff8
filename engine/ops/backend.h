// The backend interface: every op the V4.1 forward pass needs, written once by the model code
// and implemented by each backend (CPU reference in engine/ops/cpu/, later an optimised CPU
// backend and CUDA). docs/engine-ops.md lists the ops and how a backend plugs in.
//
// Goals: a narrow, explicit op set whose numerics are fixed by docs/numerics.md, so that every
// backend can be tested op by op against the reference. Activations are F32 tensors holding
// bf16-rounded values wherever the reference holds BF16; caches hold real codes and scales.
// Small per-step index metadata (positions, token ids, window slots) is passed as host spans;
// a device backend uploads it. Non-goals: a general tensor library, autograd, broadcasting.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "engine/checkpoint/checkpoint.h"
#include "engine/ops/kv_format.h"
#include "engine/ops/tensor.h"
#include "engine/ops/weights.h"

namespace flashdesk {

// ---- argument bundles -------------------------------------------------------------------------

// mHC parameters of one sublayer: fn [(2+hc)*hc, hc*D], base [(2+hc)*hc], scale [3] (all F32).
struct HcParams {
  Tensor fn;
  Tensor base;
  Tensor scale;
};

struct HcSettings {
  int64_t hc = 4;
  float norm_eps = 1e-20f;  // rms_norm_eps: the weightless RMS over hc*D
  float hc_eps = 1e-6f;
  int64_t sinkhorn_iters = 20;
};

// The window keys of one sequence: the ring (earlier steps) and this step's rows.
struct WindowKv {
  const Tensor* ring = nullptr;             // U8 [W, row]: Fp8Window rows, slot = pos mod W
  std::span<const int64_t> ring_positions;  // [W] position held by each slot, -1 = empty
  const Tensor* step = nullptr;             // U8 [n_step, row]: this step's window KV
  int64_t step_first_position = 0;          // position of step row 0 (rows are consecutive)
  int64_t window = 0;                       // W: query p sees positions [p-W+1, p] that exist
};

// A KV source's compressed entries (Fp4Entry rows) or index keys (Fp4Key rows).
struct EntryCache {
  const Tensor* rows = nullptr;  // U8 [capacity, row bytes]
  int64_t n_entries = 0;         // rows [0, n_entries) are valid
};

struct AttentionArgs {
  const Tensor* q = nullptr;           // [n, H, D] F32 (bf16 values, RoPE applied)
  std::span<const int64_t> positions;  // [n] query positions
  WindowKv window;
  EntryCache compressed;         // rows == nullptr: window-only layer
  const Tensor* topk = nullptr;  // [n, k] I32 entry ids (-1 = none); null: no entries
  const Tensor* sink = nullptr;  // [H] F32
  float softmax_scale = 1.0f;    // D^-1/2
};

// The shape rules of AttentionArgs that every backend's sparse_attention relies on (output like
// q, one sink per head, one position per query, a W-slot FP8 ring, FP4 entry rows under top-k),
// checked with FD_CHECK before any work.
void check_attention_args(const AttentionArgs& a, const Tensor& out);

struct IndexerArgs {
  const Tensor* q = nullptr;           // [n, n_ih, d_ih] F32, FP4-valued (fake-quantised)
  const Tensor* weights = nullptr;     // [n, n_ih] F32 head weights (scaled)
  std::span<const int64_t> n_visible;  // [n] query t sees entries s < n_visible[t]
  EntryCache keys;                     // Fp4Key rows
  // Length of the score row the top-k is taken over (>= keys.n_entries; entries beyond
  // keys.n_entries score -inf): the entries that exist at the end of the prompt being prefilled.
  // 0 = keys.n_entries. Ties are broken over that row, as in the official code.
  int64_t select_width = 0;
  // Candidate restriction (Reindex layers): [n, C] I32 block ids, -1 = none; entries outside
  // these blocks score -inf. Null: no restriction.
  const Tensor* restrict_blocks = nullptr;
  int64_t block_size = 8;  // candidate block size (entries)
};

// The shape rules of IndexerArgs and its outputs that every backend's indexer_select relies on.
void check_indexer_args(const IndexerArgs& a, const Tensor& topk);

// The shapes of hc_mixes' parameters and outputs for X [n, hc, d].
void check_hc_mix_args(const Tensor& X, const HcParams& p, const HcSettings& s, const Tensor& pre,
                       const Tensor& post, const Tensor& comb);

// The shape rules of the token ops (embed_rows, add_argmax, concat_columns) that every backend
// relies on.
void check_embed_rows_args(const Tensor& table, const Tensor& ids, const Tensor& rows);
void check_add_argmax_args(const Tensor& x, const Tensor& bias, const Tensor& ids);
void check_concat_columns_args(const Tensor& left, const Tensor& right, const Tensor& out);

// The shapes of engram_gather's table and output for `ids` (n x cols, row-major).
void check_engram_gather_args(const QuantTable& table, std::span<const int64_t> ids,
                              const Tensor& e);

struct RouteSettings {
  int64_t topk = 6;
  float gate_temp = 1.0f;
  float route_scale = 1.5f;
  bool norm_topk_prob = true;
};

// ---- the interface ----------------------------------------------------------------------------

// A host tensor viewing the bytes of a mapped checkpoint tensor (no copy; the checkpoint must
// outlive it): what the CPU backends' upload returns, and a device backend's upload_table.
Tensor mapped_host_tensor(const TensorView& t);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // -- beside sections --
  // Ops issued between beside_begin() and beside_end() may run beside the ops issued after the
  // section, until join(the handle beside_end returned): what the section writes may be read,
  // and what it reads or writes released, only after the join. No host reads (read,
  // synchronize) inside a section, and no nested sections. Default: the ops run in place.
  struct Beside {
    int64_t id = -1;  // the backend's own record of the section; -1: nothing to join
  };
  virtual void beside_begin() {}
  virtual Beside beside_end() { return Beside{}; }
  // Orders every op issued after this call after the section `w`.
  virtual void join(Beside w) { (void)w; }

  // -- step graphs --
  // The ops issued between step_graph_begin() and step_graph_end() may be recorded and launched
  // as one unit (the CUDA backend's graphs): what the caller sees does not change, host reads in
  // between included (they wait for the work before them, which is launched first). No nesting;
  // a step left by an exception ends with step_graph_abort(). `rows`: the step's rows (a backend
  // may time steps of one size). Default: the ops run as issued.
  virtual void step_graph_begin(int64_t rows) { (void)rows; }
  virtual void step_graph_end() {}
  virtual void step_graph_abort() {}
  // Inside a step: a layer was issued. A backend may launch what it recorded so far as one part,
  // so that the device runs it while the host issues the next.
  virtual void step_graph_layer_done() {}

  // The dtype the model keeps its residual streams X [n, hc, D] in between ops (the hc ops,
  // embed, engram_update and the row copies take it): F32 by default; BF16 where the backend's
  // ops read it (the reference stores X as BF16, and every value of it is a BF16 value, so the
  // results are the same and a prefill moves half the bytes).
  virtual DType stream_dtype() const { return DType::F32; }

  // -- memory --
  virtual Tensor alloc(DType dtype, Shape shape) = 0;  // contents undefined
  Tensor zeros(DType dtype, Shape shape);
  virtual void fill_zero(Tensor& t) = 0;
  virtual void write(Tensor& dst, const void* src, size_t bytes) = 0;  // host -> tensor
  virtual void read(const Tensor& src, void* dst, size_t bytes) = 0;   // tensor -> host
  virtual void copy(const Tensor& src, Tensor& dst) = 0;               // same byte size
  // dst row i = src row rows[i] (any dtype; row = everything but dim 0).
  virtual void gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) = 0;
  // dst row dst_rows[i] = src row src_rows[i].
  virtual void scatter_rows(const Tensor& src, std::span<const int64_t> src_rows, Tensor& dst,
                            std::span<const int64_t> dst_rows) = 0;

  // -- weights (uploaded once; a host backend may keep pointers into the mapped checkpoint,
  //    which must then outlive the weights) --
  virtual Tensor upload(const TensorView& t) = 0;      // as stored
  virtual Tensor upload_f32(const TensorView& t) = 0;  // BF16 / F32 widened to F32 (exact)
  // A large table of which a step reads a few rows (Engram: 189 GiB in V4.1-Flash): a device
  // backend may leave it in host memory (the mapped checkpoint) and gather the rows there.
  virtual Tensor upload_table(const TensorView& t) { return upload(t); }
  // A linear in its stored format: F8_E4M3 + scale, I8 (packed FP4) + scale, BF16 or F32.
  // in_host: left in host memory (the mapped checkpoint) on any backend: routed experts that a
  // device backend computes on the CPU (hybrid placement, docs/placement.md).
  LinearWeight upload_linear(const TensorView& w, const TensorView* scale, bool in_host = false);
  // A synthetic checkpoint's linear drawn on the backend itself from `recipe` (random_recipe.h):
  // rows [first_row, first_row + rows) of the weight (this rank's share) with their scale rows,
  // byte for byte what upload_linear of the checkpoint's bytes would hold, none of them in host
  // memory. The default draws nothing and returns a weight whose data is undefined: the host
  // generates the bytes (Checkpoint::tensor) and upload_linear copies them.
  virtual LinearWeight draw_linear(const RandomWeightRecipe& recipe, int64_t first_row,
                                   int64_t rows) {
    (void)recipe, (void)first_row, (void)rows;
    return {};
  }
  // A synthetic checkpoint's Engram table (FP8 rows, `recipe`) drawn by the backend into host
  // buffers of its size (`weight` codes, `scale` codes), byte for byte what the host would
  // generate: the checkpoint holds them, shared by every rank, and upload_table takes them as
  // any table. False (the default): nothing drawn, the host generates them.
  virtual bool draw_into_host(const RandomWeightRecipe& recipe, uint8_t* weight, uint8_t* scale) {
    (void)recipe, (void)weight, (void)scale;
    return false;
  }

  // -- dense ops over rows (tokens) --
  // y [n, out] = x [n, in] . W^T with the numerics of `mode` (docs/numerics.md).
  virtual void linear(const Tensor& x, const LinearWeight& w, LinearMode mode, Tensor& y) = 0;
  // The grouped wo_a: x [n, G*in_g], w [G*out_g, in_g] used as BF16; y [n, G*out_g] bf16, group g
  // reads x[:, g*in_g : (g+1)*in_g] and rows [g*out_g, (g+1)*out_g) of w.
  virtual void grouped_linear(const Tensor& x, const LinearWeight& w, int64_t groups,
                              Tensor& y) = 0;
  // y = bf16(w * x * rsqrt(mean(x^2) + eps)) per row of length x.dim(last); w [d] F32 or null.
  virtual void rms_norm(const Tensor& x, const Tensor* weight, float eps, Tensor& y) = 0;
  // Interleaved RoPE on the last rope_dim of each head_dim-vector of x [n, ..., head_dim] (in
  // place): pairs (2i, 2i+1) rotated by angle pos * inv_freq[i] (FP32), result bf16.
  // inverse = conjugate rotation (attention output). inv_freq: host [rope_dim/2].
  virtual void rope(Tensor& x, int64_t head_dim, std::span<const int64_t> positions,
                    std::span<const float> inv_freq, bool inverse) = 0;
  virtual void scale(Tensor& x, float factor) = 0;  // x *= factor (FP32)
  virtual void round_bf16(Tensor& x) = 0;           // x = bf16(x)
  // Quantise-dequantise FP4 with UE8M0 scales per `block` along the last dim (index queries).
  virtual void fake_quant_fp4_e8m0(Tensor& x, int64_t block) = 0;

  // -- tokens chosen on the backend (a greedy draft, docs/dspark.md "On the GPU") --
  // Ids that one op writes and the next reads stay in a tensor, so a chain of choices (the DSpark
  // Markov rows: each row's argmax selects the next row's bias) needs no read-back in between.
  // rows [n, D] F32 = table rows ids[i] (BF16 [V, D] widened), ids an I32 tensor [n] (an id
  // outside the table: the reference fails its check; a device backend, which cannot check
  // without a read-back, writes NaN rows).
  virtual void embed_rows(const Tensor& table, const Tensor& ids, Tensor& rows) = 0;
  // x [n, V] += bias [n, V] (FP32, in place), then ids [n] I32 = each row's argmax as
  // std::max_element finds it: the first maximum; a NaN never wins, except at index 0, where it
  // stands (the host's argmax over the same row, bit for bit).
  virtual void add_argmax(Tensor& x, const Tensor& bias, Tensor& ids) = 0;
  // out [n, a + b] = each row of left [n, a] followed by the same row of right [n, b]; the three
  // of one dtype with 4-byte elements (F32, I32).
  virtual void concat_columns(const Tensor& left, const Tensor& right, Tensor& out) = 0;

  // -- embedding and mHC --
  // X [n, hc, D] = table row ids[i] (BF16 [V, D]) copied into every stream; rows [n, D] too.
  virtual void embed(const Tensor& table, std::span<const int32_t> ids, Tensor& rows,
                     Tensor& X) = 0;
  // Per row: pre [n, hc], post [n, hc], comb [n, hc, hc] from X [n, hc, D] (docs/model-spec.md
  // §4.1).
  virtual void hc_mixes(const Tensor& X, const HcParams& p, const HcSettings& s, Tensor& pre,
                        Tensor& post, Tensor& comb) = 0;
  // hc_mixes in a beside section: a sublayer's body does not read its own mixes
  // (docs/model-spec.md §4.1), its expansion and the next sublayer's input do.
  Beside hc_mixes_beside(const Tensor& X, const HcParams& p, const HcSettings& s, Tensor& pre,
                         Tensor& post, Tensor& comb);
  // u [n, D] = bf16(sum_j pre[j] * X_j).
  virtual void hc_collapse(const Tensor& X, const Tensor& pre, Tensor& u) = 0;
  // out_k = bf16(post[k] * y + sum_j comb[j][k] * X_j); out must not alias X.
  virtual void hc_expand(const Tensor& X, const Tensor& y, const Tensor& post, const Tensor& comb,
                         Tensor& out) = 0;
  // A sublayer's input: u [n, D] = rms_norm(hc_collapse(X, pre)) with weight `norm` [D]. One op so
  // that a backend may fuse the two (a decode step's launches on a GPU). Default: the two ops.
  virtual void hc_collapse_norm(const Tensor& X, const Tensor& pre, const Tensor& norm, float eps,
                                Tensor& u);
  // The end of one sublayer and the next one's input: out = hc_expand(X, y, post, comb), then u =
  // hc_collapse_norm(out, pre, norm, eps). Default: the ops in turn.
  virtual void hc_expand_collapse_norm(const Tensor& X, const Tensor& y, const Tensor& post,
                                       const Tensor& comb, const Tensor& pre, const Tensor& norm,
                                       float eps, Tensor& out, Tensor& u);

  // -- KV caches --
  // Rows of x [n, dim] quantised into dst rows [first_row, first_row + n) in `format`.
  virtual void quantize_rows(KvFormat format, const Tensor& x, Tensor& dst, int64_t first_row) = 0;
  // A cache row's last steps as one op, so that a backend may run them as one kernel: x [n,
  // head_dim] (one head a row) = rope(rms_norm(x, *norm, eps)) (no norm where `norm` is null),
  // then dst's rows from first_row = quantize_rows(format, x). Default: the three ops.
  virtual void rope_quantize_rows(Tensor& x, const Tensor* norm, float eps,
                                  std::span<const int64_t> positions,
                                  std::span<const float> inv_freq, KvFormat format, Tensor& dst,
                                  int64_t first_row);
  // out [n, dim] F32 = dequantised src rows [first_row, first_row + n).
  virtual void dequantize_rows(KvFormat format, const Tensor& src, int64_t first_row,
                               Tensor& out) = 0;
  // Ratio-m compressor pooling (non-overlapping, per-channel softmax over the m tokens of a
  // group): kv, score [n, D] F32 follow the n_pending tokens held in pending_kv/pending_score
  // [m, D]; every complete group becomes one row of out [(n_pending + n) / m, D] (bf16 values);
  // the trailing incomplete group is left pending and n_pending updated.
  virtual void compressor_pool(const Tensor& kv, const Tensor& score, int64_t ratio,
                               Tensor& pending_kv, Tensor& pending_score, int64_t& n_pending,
                               Tensor& out) = 0;

  // -- indexer and attention (one sequence) --
  // Scores I(t,s) = bf16(sum_h bf16(relu(bf16(q[t,h] . k[s])) w[t,h])) over a row of
  // select_width entries (s >= n_visible[t] -> -inf, outside the restriction -> -inf);
  // topk [n, k] I32 = the k best (ties broken as torch's CPU topk over that row), sorted
  // ascending, entries >= n_visible[t] published as -1. With candidates (the candidate source):
  // candidates [n, C] I32 = the C best blocks by block score (max over block_size entries, the
  // row padded with -inf to whole blocks), the block of entry n_visible[t]-1 forced first, -inf
  // blocks dropped (-1), sorted ascending.
  virtual void indexer_select(const IndexerArgs& args, Tensor& topk, Tensor* candidates) = 0;
  // out [n, H, D] bf16: attention over the window keys and the top-k compressed entries with the
  // per-head sink (docs/numerics.md "Sparse attention").
  virtual void sparse_attention(const AttentionArgs& args, Tensor& out) = 0;
  // sparse_attention, then RoPE undone on out (rope(out, head dim, args.positions, inv_freq,
  // inverse)): the attention output as the output projection reads it, in one op so that a
  // backend may unrotate where it writes out. Default: the two ops.
  virtual void sparse_attention_unrotated(const AttentionArgs& args,
                                          std::span<const float> inv_freq, Tensor& out);

  // -- MoE --
  // ids [n, k] I32 (torch.topk(sorted) of the biased scores: descending, ties as torch), weights
  // [n, k] F32 from FP32 gate logits [n, E]. image_rows[i] != 0 selects bias_image for row i (may
  // be empty).
  virtual void moe_route(const Tensor& logits, const Tensor& bias, const Tensor* bias_image,
                         std::span<const uint8_t> image_rows, const RouteSettings& s, Tensor& ids,
                         Tensor& weights) = 0;
  // y [n, D] F32 (no rounding) = sum over the routed experts of each row, ascending expert id,
  // then the shared expert. experts[e] == nullptr: expert e lives on another device (skipped).
  virtual void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                           std::span<const ExpertWeights* const> experts,
                           const ExpertWeights* shared, float swiglu_limit, Tensor& y) = 0;
  // y = bf16(moe_experts(...)): the sublayer's output where no all-reduce comes between the sum
  // and its rounding (one device), so that a backend may round where it sums. Default: the two.
  virtual void moe_experts_rounded(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                   std::span<const ExpertWeights* const> experts,
                                   const ExpertWeights* shared, float swiglu_limit, Tensor& y);
  // The shared expert beside the router. It does not depend on the routing, so where a backend
  // gains from it (shared_expert_beside_router: the CUDA backend at decode sizes, where the gate
  // and the router leave the GPU's bandwidth idle) the model computes its term first, in a beside
  // section, and the routed experts afterwards with that term added last, in moe_experts' order
  // (the term's own sums may run in another order than moe_experts' shared slot: the CUDA backend
  // splits its K differently when it runs alone).
  virtual bool shared_expert_beside_router(const ExpertWeights& shared, int64_t rows) const {
    (void)shared;
    (void)rows;
    return false;
  }
  // The compressor and the indexer of a layer beside the query's projections. The top-k reads the
  // query latent but not the query itself, so where a backend gains from it (the CUDA backend at
  // decode sizes, where the selection runs on one multiprocessor while the query's wq_b could
  // stream) the model issues the compressor in the key/value row's section and the indexer in a
  // section of its own after the latent (project_attention_inputs), the same ops on the same
  // inputs.
  virtual bool indexer_beside_query(int64_t rows) const {
    (void)rows;
    return false;
  }
  // y [n, D] F32 = the shared expert's term of x (moe_experts' last). Default: moe_experts with no
  // routed expert.
  virtual void moe_shared_expert(const Tensor& x, const ExpertWeights& shared, float swiglu_limit,
                                 Tensor& y);
  // y = moe_experts(x, ids, weights, experts, no shared expert) + shared_y, added last. Default:
  // that sum through the host.
  virtual void moe_routed_experts_plus(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                       std::span<const ExpertWeights* const> experts,
                                       const Tensor& shared_y, float swiglu_limit, Tensor& y);

  // -- Engram --
  // e [n, cols * width] = dequantised table rows ids [n, cols] (row-major), concatenated per row.
  // The ids are hashed on the host (engram_hash.h) and stay there: a device backend uploads them,
  // or gathers on the host from a table left there (upload_table) without a read-back.
  virtual void engram_gather(const QuantTable& table, std::span<const int64_t> ids, Tensor& e) = 0;
  // X [n, hc, D] += gate_k * value per stream, bf16 (docs/numerics.md "Engram"); kv [n,(hc+1)*D]
  // bf16 = [key (hc x D) | value (D)]; q_weight, k_weight [hc, D] F32; masked rows gate 0.
  virtual void engram_update(Tensor& X, const Tensor& kv, const Tensor& q_weight,
                             const Tensor& k_weight, std::span<const uint8_t> masked_rows,
                             float eps) = 0;
};

inline Backend::Beside Backend::hc_mixes_beside(const Tensor& X, const HcParams& p,
                                                const HcSettings& s, Tensor& pre, Tensor& post,
                                                Tensor& comb) {
  beside_begin();
  hc_mixes(X, p, s, pre, post, comb);
  return beside_end();
}

}  // namespace flashdesk
