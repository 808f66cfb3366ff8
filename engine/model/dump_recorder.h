// Records the per-block tensors of docs/logits-dump.md from the forward observer hooks, and
// feeds recorded block inputs back (teacher forcing per block, `--block-inputs`).
//
// One recorder covers one phase: the prefill (prefix "prefill_", rows = positions 0..P-1) or the
// decode steps (prefix "decode_", a leading [T] dim, one row per step). Tensors are created on
// first use with their full shape; rows a block did not run stay 0 (top-k: -1).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/model/forward_observer.h"
#include "engine/model/model.h"

namespace flashdesk {

// Named tensors of a dump file (read side of --block-inputs).
using NamedTensors = std::map<std::string, HostTensor>;

class DumpRecorder : public ForwardObserver {
 public:
  // rows: P for the prefill, 1 for decode steps; steps: 0 for the prefill (no leading dim),
  // T for decode. first_position: the position of row 0 (of step 0 for decode).
  DumpRecorder(const Model& model, std::string prefix, int64_t rows, int64_t steps,
               int64_t first_position);

  // Teacher forcing: block inputs come from `inputs` (a dump file's tensors, same prefix).
  void set_block_inputs(const NamedTensors* inputs) { inputs_ = inputs; }
  // Decode: which step the next forward call is (0..T-1).
  void begin_step(int64_t t) { step_ = t; }
  // Candidate masks are written [.., E] with E = entries of the candidate source at the end;
  // call before taking the tensors.
  void finish(const std::map<int64_t, int64_t>& final_entries);
  NamedTensors& tensors() { return out_; }

  void on_embed(std::span<const RowInfo> rows, const HostTensor& t) override;
  void on_engram(int64_t layer, std::span<const RowInfo> rows, const HostTensor& ids,
                 const HostTensor& streams) override;
  void on_attn_out(int64_t layer, std::span<const RowInfo> rows, const HostTensor& t) override;
  void on_ffn_out(int64_t layer, std::span<const RowInfo> rows, const HostTensor& t) override;
  void on_experts(int64_t layer, std::span<const RowInfo> rows, const HostTensor& ids,
                  const HostTensor& weights) override;
  void on_topk(int64_t layer, std::span<const RowInfo> rows, const HostTensor& t) override;
  void on_candidates(int64_t layer, std::span<const RowInfo> rows, const HostTensor& blocks,
                     int64_t block_size, int64_t n_entries) override;
  void on_block_out(int64_t layer, std::span<const RowInfo> rows, const HostTensor& X,
                    const HostTensor& pre) override;
  void on_layer_tensor(int64_t layer, std::string_view kind, std::span<const RowInfo> rows,
                       const HostTensor& t) override;
  bool overrides_block_inputs() const override { return inputs_ != nullptr; }
  void override_block_input(int64_t layer, std::span<const RowInfo> rows, HostTensor& X,
                            HostTensor& pre) override;

 private:
  // The tensor `name` (prefix added) with per-row shape `inner` and `outer` dims before the
  // row dim, created filled with `fill`.
  HostTensor& tensor(const std::string& name, DType dtype, std::vector<int64_t> outer,
                     std::vector<int64_t> inner, double fill = 0);
  // Byte offset of (current step, outer index, row) in a tensor with n_outer outer dims (0 =
  // no outer dim) before the row dim.
  size_t row_offset(const HostTensor& t, int64_t n_outer, int64_t outer, int64_t row) const;
  int64_t row_of(const RowInfo& r) const;
  void put_rows(HostTensor& dst, int64_t n_outer, int64_t outer, std::span<const RowInfo> rows,
                const HostTensor& src);
  // A block-input tensor of the expected shape; FormatError otherwise.
  const HostTensor& input(const std::string& name, int64_t n_outer,
                          std::vector<int64_t> inner) const;

  const Model& model_;
  std::string prefix_;
  int64_t rows_, steps_, first_position_;
  int64_t step_ = 0;
  const NamedTensors* inputs_ = nullptr;
  NamedTensors out_;
  // candidate blocks per (layer, outer, row) until finish() expands them to entry masks
  struct CandidateRows {
    int64_t block_size = 1;
    std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<int32_t>, int64_t>> rows;
  };
  std::map<int64_t, CandidateRows> candidates_;
};

}  // namespace flashdesk
