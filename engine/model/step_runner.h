// One step of the forward pass over a batch (internal to engine/model): the rows of every
// sequence stacked for the dense ops, per-sequence slices for attention, and the per-step
// scratch (top-k and candidate blocks by layer) the Reuse and Reindex layers read.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "engine/model/model.h"
#include "engine/model/model_weights.h"

namespace flashdesk {

// One sequence's rows in the current row set (its positions are consecutive).
struct SeqRows {
  int64_t seq = 0;  // index into the batch
  SequenceState* state = nullptr;
  int64_t first_row = 0;
  int64_t n_rows = 0;
  int64_t first_position = 0;
};

class StepRunner {
 public:
  StepRunner(Model& model, std::span<SequenceStep> batch, ForwardObserver* observer);
  void run();

 private:
  // step_runner.cpp: the driver
  void embed();
  void mark_image_tokens(const SequenceStep& s, const SeqRows& r);
  void overwrite_image_rows(Tensor& rows);
  std::vector<uint8_t> image_rows() const;  // per row: 1 = image-span token; empty if none
  void run_block(int64_t layer);
  void shrink_to_decoder_rows();
  Tensor compute_logits();  // the wanted rows' logits on the device (undefined: none)
  void take_logits(const Tensor& logits);
  void override_input(int64_t layer);
  Tensor attn_input(const Tensor& X, const Tensor& pre, const Tensor& norm);

  // attention_layer.cpp
  // after_sections: BesideWork::after_sections (the sublayer's mixes), called once in every case.
  Tensor attention(int64_t layer, const Tensor& x, bool compressed_done,
                   const std::function<void()>& after_sections);
  void compress(int64_t layer, const Tensor& x);
  // Room for every entry this step's compression of `layer` may add (compress grows the caches
  // itself otherwise): taken before a beside section compresses, since a growth there would free
  // the old buffers while the section's copy still reads them.
  void reserve_compressed_entries(int64_t layer);
  void index(int64_t layer, const Tensor& qr, const Tensor& x);
  // indexer_rows.cpp
  void index_each_row(int64_t layer, const SeqRows& s, const Tensor& qi, const Tensor& w);
  void keep_for_rollback(SequenceState& st, int64_t layer, const Tensor& kv, const Tensor& score,
                         int64_t skip);

  // dspark_features.cpp
  void record_target_features(int64_t layer);

  // ffn_layer.cpp
  Tensor moe(int64_t layer, const Tensor& x);
  void engram(int64_t layer);
  // The Engram ids [n_rows, columns] of `layer` for the current rows; masked: each row's gate off.
  HostTensor engram_ids(int64_t layer, std::vector<uint8_t>& masked) const;
  // Every Engram layer's table rows gathered and uploaded at the step's start in one beside
  // section (issue 18: the ids depend on the tokens only), for engram() to take where the ids
  // it finds are still the same (a decoder cut changes the rows); settle_engram_ahead() joins
  // the section if some were left, before their tensors go.
  void prefetch_engram();
  void settle_engram_ahead();

  // helpers
  Tensor f32(Shape shape) { return be_.alloc(DType::F32, shape); }
  // Residual streams [n, hc, D] in the backend's storage (Backend::stream_dtype).
  Tensor streams(Shape shape) { return be_.alloc(be_.stream_dtype(), shape); }
  HostTensor to_host(const Tensor& t);
  // Streams to and from the host as F32 values, whatever their storage (observers see F32).
  HostTensor streams_to_host(const Tensor& X);
  void write_streams(Tensor& X, const HostTensor& values);
  // F32 rows [n, D] in the streams' storage (the image rows scattered into them).
  Tensor as_stream_rows(const Tensor& rows);
  // Hands a finer per-row tensor of `layer` to the observer, if there is one.
  void observe(int64_t layer, std::string_view kind, const Tensor& t);
  // A sublayer's mixes in a beside section (Backend::hc_mixes_beside); an observer sees them at
  // once as `name`_pre, _post and _comb (the section joined first).
  Backend::Beside mixes_beside(int64_t layer, const Tensor& X, const HcParams& p,
                               const HcSettings& hs, std::string_view name, Tensor& pre,
                               Tensor& post, Tensor& comb);
  std::span<const RowInfo> row_info(const SeqRows& s) const {
    return std::span<const RowInfo>(rows_).subspan(static_cast<size_t>(s.first_row),
                                                   static_cast<size_t>(s.n_rows));
  }
  std::span<const int64_t> positions(const SeqRows& s) const {
    return std::span<const int64_t>(positions_)
        .subspan(static_cast<size_t>(s.first_row), static_cast<size_t>(s.n_rows));
  }
  void all_reduce_and_round(Tensor& t);
  // Whether block `layer` takes its attention input straight from the previous block's streams:
  // no Engram update, decoder cut or observer between them.
  bool next_input_follows(int64_t layer) const;

  Model& model_;
  Backend& be_;
  const TextConfig& text_;
  const ModelWeights& w_;
  std::span<SequenceStep> batch_;
  ForwardObserver* obs_;

  std::vector<SeqRows> seqs_;
  int64_t n_rows_ = 0;
  std::vector<int64_t> positions_;  // per row of the current row set
  std::vector<RowInfo> rows_;       // per row of the current row set
  Tensor X_;                        // [n_rows, hc, D] the residual streams
  Tensor pre_;                      // [n_rows, hc] the incoming pre-mix of the next block
  // [n_rows, D] the next block's attention input, made with X_ by the previous block's last op
  // where nothing comes between the two (next_input_follows); consumed by the next block.
  Tensor next_attn_input_;
  // Per sequence: top-k [n_rows, k] I32 of each index source, candidate blocks of the candidate
  // source, by layer.
  std::vector<std::map<int64_t, Tensor>> topk_, candidates_;
  // prefetch_engram's rows by layer: the ids they were gathered for and the rows.
  struct EngramAhead {
    HostTensor ids;
    Tensor rows;
  };
  std::map<int64_t, EngramAhead> engram_ahead_;
  Backend::Beside engram_upload_;  // the section that gathered them (id -1 once joined)
};

}  // namespace flashdesk
