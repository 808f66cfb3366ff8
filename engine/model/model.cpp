// Model: loading, per-sequence state, request validation, and the prefill / decode drivers on
// top of the step runner.
#include "engine/model/model.h"

#include <algorithm>
#include <set>

#include "engine/model/engram_hash.h"
#include "engine/model/engram_tables.h"
#include "engine/model/model_weights.h"
#include "engine/model/rope_freqs.h"
#include "engine/model/sequence_cut.h"
#include "engine/model/step_runner.h"

namespace flashdesk {

PrefillMode parse_prefill_mode(std::string_view text) {
  if (text == "exact") return PrefillMode::Exact;
  if (text == "bounded") return PrefillMode::Bounded;
  throw InvalidRequest("prefill mode must be 'exact' or 'bounded', not '" + std::string(text) +
                       "'");
}

namespace {

// Shapes the kernels rely on; a config breaking them is a bad file, not a bug.
void check_supported(const TextConfig& t, const std::string& file, int world) {
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) throw FormatError(file, "unsupported text_config: " + what);
  };
  need(t.head_dim % 32 == 0, "head_dim must be a multiple of 32");
  need(t.index_head_dim % 32 == 0, "index_head_dim must be a multiple of 32");
  need(t.qk_rope_head_dim % 2 == 0 && t.qk_rope_head_dim <= t.head_dim &&
           t.qk_rope_head_dim <= t.index_head_dim,
       "qk_rope_head_dim must be even and fit head_dim and index_head_dim");
  need(t.num_attention_heads % t.o_groups == 0, "num_attention_heads must divide into o_groups");
  need(t.o_groups % world == 0, "o_groups must divide over the devices");
  need(t.hidden_size % 32 == 0 && t.moe_intermediate_size % 32 == 0,
       "hidden_size and moe_intermediate_size must be multiples of 32");
  need(t.sliding_window > 0, "sliding_window must be positive");
  need(!t.candidate_source_layer_id || t.candidate_block_size > 0,
       "candidate_block_size must be positive");
}

// A replayed prefix tail must be the state's own last tokens, and together with the global KV
// present (a restore) it must leave no position uncompressed.
void check_replay(const SequenceStep& s) {
  const int64_t n = static_cast<int64_t>(s.tokens.size()), pos = s.state->position();
  if (s.replay < 0 || s.replay > n || s.replay > pos)
    throw InvalidRequest("replay of " + std::to_string(s.replay) +
                         " tokens does not fit the sequence");
  for (int64_t i = 0; i < s.replay; ++i)
    if (s.tokens[static_cast<size_t>(i)] !=
        s.state->tokens[static_cast<size_t>(pos - s.replay + i)])
      throw InvalidRequest("replayed tokens differ from the sequence's tokens");
  for (const GlobalKv& g : s.state->global) {
    if (g.ratio == 0) continue;
    const int64_t covered = g.n_entries * g.ratio + g.n_pending;
    if (covered < pos - s.replay || covered > pos)
      throw InvalidRequest("the global KV covers " + std::to_string(covered) +
                           " positions; the step must replay from there (it starts at " +
                           std::to_string(pos - s.replay) + ")");
  }
}

}  // namespace

Model::Model(std::shared_ptr<const Checkpoint> checkpoint, Backend& backend,
             const ModelOptions& options, Collective* comm)
    : checkpoint_(std::move(checkpoint)),
      backend_(backend),
      comm_(comm ? comm : &single_),
      roles_(checkpoint_->roles()) {
  const TextConfig& t = config().text;
  const std::string cfg_file = (checkpoint_->dir() / "config.json").string();
  check_supported(t, cfg_file, comm_->world());
  if (!checkpoint_->partial_layers().empty())
    throw InvalidRequest(
        "the checkpoint holds only some layers (make-random or synthetic "
        "--layers), and a model runs all of them");
  decoder_first_ = decoder_first_layer(t);
  max_context_ = options.max_context > 0 ? options.max_context : t.max_position_embeddings;
  LoadProgressTracker progress(*checkpoint_, roles_, options.on_load_progress,
                               dspark_stages(t) > 0 && comm_->world() == 1);
  weights_ = std::make_unique<ModelWeights>(
      load_model_weights(*checkpoint_, roles_, backend_, ShardPlan{comm_->rank(), comm_->world()},
                         &progress, options.host_experts_from_layer));
  if (!t.engram_layer_ids.empty()) {
    EngramTables engram = load_engram_tables(
        *checkpoint_, {.tokenizer = options.tokenizer, .cache_dir = options.engram_cache_dir});
    engram_ = std::make_unique<EngramHasher>(t, std::move(engram.tables), engram.map_source);
  }
  progress.finish();
  for (const LayerRole& r : roles_) rope_.push_back(rope_inv_freq(t, r.compress_ratio));
}

Model::~Model() = default;

SequenceState Model::new_sequence() const {
  const TextConfig& t = config().text;
  const int64_t W = t.sliding_window, D = t.head_dim;
  SequenceState s;
  for (const LayerRole& r : roles_) {
    WindowRing ring{backend_.zeros(DType::U8, Shape{W, kv_row_bytes(KvFormat::Fp8Window, D)}),
                    std::vector<int64_t>(static_cast<size_t>(W), -1)};
    s.rings.push_back(std::move(ring));
    GlobalKv g;
    if (r.compress_ratio > 0 && r.kv_source == r.layer) {
      g.ratio = r.compress_ratio;
      g.entries = backend_.alloc(DType::U8, Shape{0, kv_row_bytes(KvFormat::Fp4Entry, D)});
      g.index_keys =
          backend_.alloc(DType::U8, Shape{0, kv_row_bytes(KvFormat::Fp4Key, t.index_head_dim)});
      g.pending_kv = backend_.zeros(DType::F32, Shape{g.ratio, D});
      g.pending_score = backend_.zeros(DType::F32, Shape{g.ratio, D});
    }
    s.global.push_back(std::move(g));
  }
  return s;
}

void Model::step(std::span<SequenceStep> batch, ForwardObserver* observer) {
  const int64_t V = config().text.vocab_size;
  std::set<const SequenceState*> seen;
  for (const SequenceStep& s : batch) {
    FD_CHECK(s.state != nullptr, "step without a sequence state");
    if (!seen.insert(s.state).second) throw InvalidRequest("a sequence appears twice in one step");
    if (s.tokens.empty()) throw InvalidRequest("a step needs at least one token per sequence");
    check_replay(s);
    const int64_t n = static_cast<int64_t>(s.tokens.size()) - s.replay;
    const int64_t end = s.state->position() + n;
    if (end > max_context_)
      throw InvalidRequest("sequence of " + std::to_string(end) +
                           " tokens exceeds the context limit of " + std::to_string(max_context_));
    for (int32_t id : s.tokens) {
      if (id < 0 || id >= V)
        throw InvalidRequest("token id " + std::to_string(id) + " outside the vocabulary [0, " +
                             std::to_string(V) + ")");
      if (engram_ && id >= engram_->map_size())
        throw InvalidRequest("token id " + std::to_string(id) + " has no Engram compressed id");
    }
    if (s.decoder_from < -1) throw InvalidRequest("decoder_from must be a position or -1");
    if (s.decoder_from >= end && s.logits != LogitsWanted::None)
      throw InvalidRequest("decoder_from " + std::to_string(s.decoder_from) +
                           " leaves no row for the logits of this step");
  }
  StepRunner(*this, batch, observer).run();
}

std::vector<float> Model::prefill(SequenceState& state, std::span<const int32_t> ids,
                                  const PrefillOptions& options, ForwardObserver* observer) {
  const int64_t P = static_cast<int64_t>(ids.size()), W = config().text.sliding_window;
  const int64_t R = options.replay;
  if (P == 0) throw InvalidRequest("empty prompt");
  if (R < 0 || R > P || R > state.position())
    throw InvalidRequest("replay of " + std::to_string(R) + " tokens does not fit the sequence");
  if (options.all_positions && options.mode == PrefillMode::Bounded)
    throw InvalidRequest("logits of every position need exact prefill");
  const int64_t first = state.position() - R, end = first + P;
  if (end > max_context_)
    throw InvalidRequest("prompt of " + std::to_string(end) +
                         " tokens exceeds the context limit of " + std::to_string(max_context_));
  const int64_t mark = options.mark_at;
  if (mark != -1 && (mark < first + R || mark >= end))
    throw InvalidRequest("window mark at " + std::to_string(mark) + " is outside the prefill [" +
                         std::to_string(first + R) + ", " + std::to_string(end) + ")");
  const int64_t chunk = options.chunk_tokens > 0 ? options.chunk_tokens : P;
  const int64_t decoder_from = options.mode == PrefillMode::Bounded ? end - std::min(P, W) : -1;
  // The steps stop once where the mark is taken; a step boundary changes no value (chunked
  // prefill gives the same results, docs/numerics.md).
  const int64_t mark_index = mark == -1 ? -1 : mark - first;
  if (mark_index == 0) mark_window(backend_, state);
  std::vector<float> logits;
  for (int64_t at = 0, n = 0; at < P; at += n) {
    n = std::min(chunk, P - at);
    if (at < mark_index && mark_index < at + n) n = mark_index - at;
    const bool last = at + n == P;
    SequenceStep s;
    s.state = &state;
    s.tokens = ids.subspan(static_cast<size_t>(at), static_cast<size_t>(n));
    s.decoder_from = decoder_from;
    s.replay = std::clamp<int64_t>(R - at, 0, n);
    s.prompt_end = end;
    s.logits = options.all_positions ? LogitsWanted::All
                                     : (last ? LogitsWanted::Last : LogitsWanted::None);
    std::vector<ImageEmbedding> images;  // spans re-based on this chunk's first id
    for (const ImageEmbedding& img : options.images)
      if (img.first < at + n && img.first + img.rows.rows() > at)
        images.push_back(ImageEmbedding{img.first - at, img.rows});
    s.images = images;
    s.want_features = options.target_features;
    step(std::span<SequenceStep>(&s, 1), observer);
    if (options.on_step) options.on_step(s);
    logits.insert(logits.end(), s.out_logits.begin(), s.out_logits.end());
    if (at + n == mark_index) mark_window(backend_, state);
  }
  return logits;
}

std::vector<float> Model::decode(SequenceState& state, int32_t id, ForwardObserver* observer) {
  SequenceStep s;
  s.state = &state;
  s.tokens = std::span<const int32_t>(&id, 1);
  step(std::span<SequenceStep>(&s, 1), observer);
  return std::move(s.out_logits);
}

namespace {

std::vector<float> dequantize(Backend& be, KvFormat f, const Tensor& rows, int64_t n, int64_t dim) {
  std::vector<float> out(static_cast<size_t>(n * dim));
  if (n == 0) return out;
  Tensor t = be.alloc(DType::F32, Shape{n, dim});
  be.dequantize_rows(f, rows, 0, t);
  be.read(t, out.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace

std::vector<float> Model::dequantized_entries(const SequenceState& s, int64_t layer) {
  const GlobalKv& g = s.global.at(static_cast<size_t>(layer));
  FD_CHECK(g.entries.defined(), "layer " + std::to_string(layer) + " owns no global KV");
  return dequantize(backend_, KvFormat::Fp4Entry, g.entries, g.n_entries, config().text.head_dim);
}

std::vector<float> Model::dequantized_index_keys(const SequenceState& s, int64_t layer) {
  const GlobalKv& g = s.global.at(static_cast<size_t>(layer));
  FD_CHECK(g.index_keys.defined(), "layer " + std::to_string(layer) + " owns no index keys");
  return dequantize(backend_, KvFormat::Fp4Key, g.index_keys, g.n_entries,
                    config().text.index_head_dim);
}

std::vector<float> Model::dequantized_ring(const SequenceState& s, int64_t layer) {
  const WindowRing& r = s.rings.at(static_cast<size_t>(layer));
  const int64_t W = r.rows.rows(), D = config().text.head_dim;
  std::vector<float> out = dequantize(backend_, KvFormat::Fp8Window, r.rows, W, D);
  for (int64_t slot = 0; slot < W; ++slot)
    if (r.positions[static_cast<size_t>(slot)] < 0) std::fill_n(out.begin() + slot * D, D, 0.0f);
  return out;
}

}  // namespace flashdesk
