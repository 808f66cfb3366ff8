// Compares the tensors found in a checkpoint's files with the tensors its config requires.
#pragma once

#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/tensor_spec.h"

namespace flashdesk {

struct FoundTensor {
  const SafetensorsEntry* entry;
  std::string file;  // shard file name
};

// Every missing, unexpected, mis-typed and mis-shaped tensor, one line each ("missing
// layers.3.attn_norm.weight (BF16 [256])"); empty when the checkpoint matches.
std::vector<std::string> tensor_problems(const std::vector<TensorSpec>& expected,
                                         const std::vector<FoundTensor>& found);

// "[a, b, c]"
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace flashdesk
