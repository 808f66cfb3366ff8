// The tensors a checkpoint must hold, derived from its config (MODEL-REFERENCE §2.4).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/util/dtype.h"

namespace flashdesk {

struct TensorSpec {
  std::string name;            // e.g. "layers.2.attn.wq_a.weight"
  DType dtype;
  std::vector<int64_t> shape;  // as stored (packed FP4 tensors: [out, in/2] bytes)
};

// Every tensor of the main model, the vision tower (when config.vision is set) and the DSpark
// stages (num_nextn_predict_layers > 0), in a stable order.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

}  // namespace flashdesk
