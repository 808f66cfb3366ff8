// The DeepSeek-V4.1 text forward pass (docs/model-spec.md §11.2) for any V4.1-style config, written
// once against the backend interface: embedding into hc streams, Engram, single-pass mHC blocks
// with CSA2 attention in every role and MoE, final collapse, norm and FP32 logits.
//
// Goals: one step function for chunked prefill, bounded replay, decode and multi-token
// verification over a batch of sequences, each with its own SequenceState; numerics exactly as
// docs/numerics.md; image spans (docs/model-spec.md §8) take their embeddings from the vision
// encoder (engine/vision), route with bias_vl and are dead for Engram. Non-goals here: sampling
// and the generation loop (engine/runtime); the DSpark draft head is dspark_draft.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/model/forward_observer.h"
#include "engine/model/load_progress.h"
#include "engine/model/sequence_state.h"
#include "engine/ops/backend.h"
#include "engine/ops/collective.h"
#include "engine/tokenizer/tokenizer.h"

namespace flashdesk {

struct ModelWeights;
class EngramHasher;

enum class PrefillMode {
  Exact,    // every layer over every prompt token (the reference)
  Bounded,  // decoder bounded replay: decoder blocks over the last min(P, W) tokens only
};
PrefillMode parse_prefill_mode(std::string_view text);  // "exact" | "bounded", else InvalidRequest

enum class LogitsWanted { None, Last, All };

// One image span's embeddings (engine/vision VisionEncoder::span_rows): rows [len, hidden_size]
// F32 holding bf16 values, on the model's backend. Row j replaces the embedding of token
// first + j of the step (prefill: of its ids); rows outside the step's tokens are skipped, so a
// span may straddle chunks. Those tokens route with bias_vl and are dead for Engram hashing.
struct ImageEmbedding {
  int64_t first = 0;
  Tensor rows;
};

// One sequence's part of a step: `tokens` enter at positions state->position() onwards.
struct SequenceStep {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  // Bounded replay: the decoder blocks run only on positions >= decoder_from (the first decoder
  // layer still turns every row into global KV). -1: every row runs every layer.
  int64_t decoder_from = -1;
  // Encoder bounded replay after a restore: the first `replay` tokens are the state's last
  // tokens (their global KV is present); they run again to rebuild window KV (and pending
  // compressor tokens), their global KV is neither recomputed nor overwritten.
  int64_t replay = 0;
  // The position one past the prompt this step is a chunk of (0: this step's end). Top-k rows
  // choose among exactly tied scores as the official code does over the entries that exist at
  // the end of the whole prompt, so a prompt gives the same bits in any chunking
  // (docs/numerics.md "Top-k").
  int64_t prompt_end = 0;
  LogitsWanted logits = LogitsWanted::Last;
  // A verify step (speculative decoding): each row picks its top-k entries and candidate blocks
  // as a one-token decode at its position would, over a score row as wide as its visible entries
  // (ties fall by the row's width, docs/numerics.md "Top-k"), so its logits are the decode's.
  bool rows_as_decode = false;
  std::span<const ImageEmbedding> images = {};  // image spans overlapping this step's tokens

  // DSpark target features (docs/dspark.md): with want_features, the mean over the hc streams of
  // the input of each dspark_target_layer_ids layer, for the rows that reach those layers.
  bool want_features = false;

  // Outputs: logits [logit_positions.size(), vocab] F32, row-major.
  std::vector<float> out_logits;
  std::vector<int64_t> logit_positions;
  // want_features: [rows, targets, hidden] F32 (bf16 values) on the backend, for positions
  // features_first_position onwards (undefined when no row reached the target layers).
  Tensor out_features = {};
  int64_t features_first_position = 0;
};

struct PrefillOptions {
  PrefillMode mode = PrefillMode::Exact;
  int64_t chunk_tokens = 0;    // tokens per step; 0 = the whole prompt in one step
  bool all_positions = false;  // logits of every position (exact mode only)
  int64_t replay = 0;          // leading ids already in the state (SequenceStep::replay)
  std::span<const ImageEmbedding> images = {};  // first = index into the prefill ids
  // A position the prefill passes (from the end of the replay to its last token) at which the
  // state's window is marked (sequence_cut.h): the steps stop there once. -1: no mark.
  int64_t mark_at = -1;
  // Called after each step of the prefill with that step (its target features when
  // target_features is set): how a DSpark draft head seeds its rings from a prompt.
  bool target_features = false;
  std::function<void(const SequenceStep&)> on_step = {};
};

struct ModelOptions {
  int64_t max_context = 0;                // longest sequence accepted; 0 = max_position_embeddings
  LoadProgressCallback on_load_progress;  // bytes of weights uploaded, per tensor (may be empty)
  // Engram models without engram_map.safetensors (a published directory) build the token map
  // from this tokenizer (null: the directory's tokenizer.json) and keep it in engram_cache_dir
  // (engram_map_cache.h; empty: built at every load).
  const Tokenizer* tokenizer = nullptr;
  std::filesystem::path engram_cache_dir{};
  // The routed experts of layers >= this stay in host memory and a device backend computes them
  // on the CPU (hybrid placement, docs/placement.md); -1: every expert on the backend.
  int64_t host_experts_from_layer = -1;
};

class Model {
 public:
  // Loads (uploads) the weights of `checkpoint` to `backend`; both must outlive the model, and
  // so must `comm` (null: a single device). Throws FormatError when the Engram token map can be
  // neither read (engram_map.safetensors) nor built (tokenizer.json), or disagrees with the config.
  Model(std::shared_ptr<const Checkpoint> checkpoint, Backend& backend,
        const ModelOptions& options = {}, Collective* comm = nullptr);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return checkpoint_->config(); }
  const std::vector<LayerRole>& roles() const { return roles_; }
  int64_t decoder_first() const { return decoder_first_; }
  int64_t max_context() const { return max_context_; }
  Backend& backend() { return backend_; }

  SequenceState new_sequence() const;

  // Runs one step over a batch. Throws InvalidRequest for empty or out-of-range token ids, a
  // sequence beyond max_context, or a bad decoder_from; no state changes then.
  void step(std::span<SequenceStep> batch, ForwardObserver* observer = nullptr);

  // Prefill of `ids` (from the state's current position) in chunks; returns the logits of the
  // last position [V], or of every position [P, V] with all_positions.
  std::vector<float> prefill(SequenceState& state, std::span<const int32_t> ids,
                             const PrefillOptions& options, ForwardObserver* observer = nullptr);
  // One token at the next position; returns its logits [V].
  std::vector<float> decode(SequenceState& state, int32_t id, ForwardObserver* observer = nullptr);

  // The global KV / window ring of a layer dequantised to F32, for dumps and tests:
  // entries [n_entries, head_dim], keys [n_entries, index_head_dim], ring [W, head_dim] (empty
  // slots 0).
  std::vector<float> dequantized_entries(const SequenceState& s, int64_t layer);
  std::vector<float> dequantized_index_keys(const SequenceState& s, int64_t layer);
  std::vector<float> dequantized_ring(const SequenceState& s, int64_t layer);

 private:
  friend class StepRunner;
  friend class DsparkDrafter;
  std::shared_ptr<const Checkpoint> checkpoint_;
  Backend& backend_;
  Collective* comm_;
  SingleDevice single_;
  std::vector<LayerRole> roles_;
  int64_t decoder_first_ = 0;
  int64_t max_context_ = 0;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<EngramHasher> engram_;
  std::vector<std::vector<float>> rope_;  // inv_freq per main layer
};

}  // namespace flashdesk
