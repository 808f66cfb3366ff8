// The DSpark draft head of DeepSeek-V4.1 (docs/dspark.md, MODEL-REFERENCE §10.1), written against
// the backend interface like the main blocks: stage 0 turns the target features into main_x
// (main_proj, main_norm); every stage keeps its own window ring of main-x KV at the target
// positions; a draft is a block [last token, noise x (B-1)] through the stages (single-pass mHC,
// window-only attention that is bidirectional inside the block, MoE), the shared norm and head,
// the sequential Markov bigram correction and the confidence head.
//
// Non-goals here: the verify loop and its sampling rule (dspark_decode.h), several devices.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/model/model.h"
#include "engine/model/sequence_state.h"

namespace flashdesk {

struct DsparkWeights;

// Per sequence: each stage's ring of main-x KV. Only accepted target positions are written
// (the verify loop seeds after it knows what it keeps), so it never needs rolling back.
struct DraftState {
  std::vector<WindowRing> rings;  // one per stage, sliding_window slots, slot = pos mod W
  int64_t seeded = 0;             // target positions written so far end here
  // Seeding may start late (a bounded prefill has features of its last W positions only, a
  // reused prefix none): the rings hold [valid_from, seeded), and a draft lists only those.
  int64_t valid_from = 0;
};

// Chooses the draft of block row `row` from its Markov-corrected logits [vocab]; empty = argmax.
using DraftPicker = std::function<int32_t(int64_t row, std::span<const float> logits)>;

// Whether a draft brings its corrected logits back (DraftBlock::logits): the tests and the sampling
// rule read them; a greedy verify round needs only the tokens and confidences, and on a GPU the
// [B, vocab] copy is most of the draft's one read-back.
enum class DraftLogits { Kept, Dropped };

struct DraftBlock {
  std::vector<int32_t> tokens;    // [B] drafts for positions P+1 .. P+B (picked, or greedy)
  std::vector<float> logits;      // [B, vocab] after the Markov correction; empty if Dropped
  std::vector<float> confidence;  // [B] the confidence head's acceptance logits
};

class DsparkDrafter {
 public:
  // Throws InvalidRequest when the model has no DSpark stages loaded.
  explicit DsparkDrafter(Model& model);
  // True when the model's DSpark stages were loaded (the config declares them, the checkpoint
  // holds mtp.*, one device): what the constructor needs.
  static bool available(const Model& model);

  int64_t block_size() const;
  DraftState new_state() const;

  // Writes the main-x KV of target positions [first, first + n) into every stage's ring from
  // their features [n, targets, hidden] (SequenceStep::out_features); first >= state.seeded.
  void seed(DraftState& state, const Tensor& features, int64_t first);

  // A draft after the seeded positions: row 0 is `last`, the token at position P = state.seeded
  // that the target chose and has not run yet. Each row's token is pick(row, corrected logits)
  // (greedy without a picker) and conditions the next row's Markov correction. Greedy, the rows
  // are chosen on the backend and the draft reads back once; a picker reads each row as well.
  // With a picker the logits are always kept (the picker's rows).
  DraftBlock draft(const DraftState& state, int32_t last, const DraftPicker& pick = {},
                   DraftLogits logits = DraftLogits::Kept);

 private:
  struct Results;
  Tensor f32(Shape shape) { return be_.alloc(DType::F32, shape); }
  Results results(int64_t B);
  Tensor run_stages(const DraftState& state, int32_t last);
  void head(const Tensor& x, const DraftPicker& pick, Results& res, DraftBlock& out);
  void markov_row(int64_t row, Results& res);
  void confidence(const Tensor& x, Results& res);
  void read_back(const Results& res, bool with_logits, DraftBlock& out);
  Tensor norm_input(const Tensor& X, const Tensor& pre, const Tensor& norm);
  void run_stage(int64_t stage, const DraftState& state, std::span<const int64_t> positions,
                 Tensor& X, Tensor& pre);
  Tensor attention(int64_t stage, const DraftState& state, std::span<const int64_t> positions,
                   const Tensor& x);
  Tensor moe(int64_t stage, const Tensor& x);

  Model& model_;
  Backend& be_;
  const TextConfig& text_;
  const DsparkWeights& w_;
  std::vector<float> rope_;  // window-only layers' inv_freq (rope_theta, no YaRN)
};

}  // namespace flashdesk
