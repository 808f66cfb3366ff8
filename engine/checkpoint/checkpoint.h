// A model directory opened for inference: config.json, safetensors shards (memory-mapped, never
// read whole) and the validated tensor table. The model code reads weights only through this.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/tensor_spec.h"
#include "engine/util/dtype.h"

namespace flashdesk {

// A tensor inside a mapped shard. Valid as long as the Checkpoint lives.
struct TensorView {
  std::string_view name;
  DType dtype = DType::F32;
  std::span<const int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t dim(size_t i) const { return shape[i]; }
};

class Checkpoint {
 public:
  // Reads config.json, maps model.safetensors or the shards of model.safetensors.index.json,
  // and validates them against expected_tensors(): every missing, unknown, mis-shaped or
  // mis-typed tensor is listed by name in one FormatError.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& dir);

  virtual ~Checkpoint() = default;
  virtual const std::filesystem::path& dir() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual const std::vector<LayerRole>& roles() const = 0;
  virtual bool has(std::string_view name) const = 0;
  // The named tensor; a missing name is a bug (the directory was validated at open).
  virtual TensorView tensor(std::string_view name) const = 0;
  virtual std::vector<std::string> tensor_names() const = 0;
  // A stable digest of config.json and every shard's header and size: keys cached KV.
  virtual std::string fingerprint() const = 0;
};

}  // namespace flashdesk
