// The tensors a checkpoint must hold, derived from its config (docs/model-spec.md §2.4), and the
// subsets a partial checkpoint (a few full-size layers for benchmarks) holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/util/dtype.h"

namespace flashdesk {

struct TensorSpec {
  std::string name;  // e.g. "layers.2.attn.wq_a.weight"
  DType dtype;
  std::vector<int64_t> shape;  // as stored (packed FP4 tensors: [out, in/2] bytes)

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * dtype_size(dtype); }
  // Model parameters this tensor holds: packed FP4 bytes hold two, block scales none.
  int64_t parameters() const;
};

// Every tensor of the main model, the vision tower (when config.vision is set) and the DSpark
// stages (num_nextn_predict_layers > 0), in a stable order: embed, layers 0.., norm, head,
// vision, mtp.0...
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

// The main layer a tensor belongs to ("layers.7.attn.wkv.weight" -> 7), or -1 for others.
int64_t main_layer_of(std::string_view tensor_name);

// The layers a partial checkpoint of `layers` holds: those layers plus the layers they read
// shared state from (KV, index and candidate sources), ascending. Throws InvalidRequest for a
// layer that does not exist.
std::vector<int64_t> partial_layer_closure(const ModelConfig& config, std::vector<int64_t> layers);

// The tensors of a partial checkpoint holding `closure` (from partial_layer_closure): those main
// layers in full plus embed, norm and head; no vision tower, no DSpark stages.
std::vector<TensorSpec> expected_partial_tensors(const ModelConfig& config,
                                                 const std::vector<int64_t>& closure);

}  // namespace flashdesk
