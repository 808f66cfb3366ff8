// A checkpoint whose weights are generated, not read: the bytes `make-random` would write for the
// same config, seed and layers (random_checkpoint.h), so the engine runs real shapes (all 43
// layers of V4.1-Flash, 475 GiB) on a machine with no disk for them.
//
// Goals: byte-for-byte the tensors and Engram token map of write_random_checkpoint; generation on
// first tensor() (every thread, row chunks as the writer), so opening costs nothing; host memory
// returned once a backend has copied a weight (Checkpoint::release_tensor); a recipe for each
// linear, so a GPU backend can draw it itself (random_recipe). Non-goals (for now): a vision
// tower or DSpark stages in a partial set (make-random leaves them out too).
//
// What differs from Checkpoint::open of the written directory: files() is empty; dir() is the
// folder holding the config file (tokenizer.json is looked for there, and errors about the config
// name dir()/config.json); weight_digest_report() digests nothing and says what synthesises the
// weights; the fingerprint is SHA-256 over the tag "flashdesk-synthetic-fingerprint-v1\n",
// kKvNumericsVersion, kRandomWeightsVersion, the config's bytes (length first), the seed and
// the held layers (count, then each; none for the whole model), numbers as 8-byte little-endian.
// It therefore differs from the written directory's fingerprint (which digests the files), and
// KV cached with one is never reused with the other.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_tensor_writer.h"
#include "engine/checkpoint/synthetic_tensor.h"

namespace flashdesk {

struct SyntheticWeights {
  uint64_t seed = 0;
  // Empty: the whole model. Else make-random --layers: these main layers plus their KV, index
  // and candidate sources, embed, norm and head (partial_layers() lists the closure).
  std::vector<int64_t> layers;
  int threads = 0;  // generation threads; 0: every hardware thread
};

class SyntheticCheckpoint final : public Checkpoint {
 public:
  // `config`: a config.json, or a directory holding one. Throws IoError for a missing or
  // unreadable config, FormatError for an invalid one, InvalidRequest for a layer the config
  // does not have. Generates nothing yet.
  SyntheticCheckpoint(const std::filesystem::path& config, const SyntheticWeights& weights);

  const std::filesystem::path& dir() const override { return dir_; }
  const ModelConfig& config() const override { return config_; }
  const std::vector<LayerRole>& roles() const override { return roles_; }
  bool has(std::string_view name) const override { return table_.contains(name); }
  // Generates the weight (with its scale) on first use, on `threads` threads; thread-safe.
  TensorView tensor(std::string_view name) const override;
  TensorView tensor_drawn(std::string_view name, const DrawInto& draw) const override;
  TensorSpec tensor_spec(std::string_view name) const override { return *entry(name).spec; }
  void release_tensor(std::string_view name) const override {
    tensors_[entry(name).tensor]->release();
  }
  std::vector<std::string> tensor_names() const override { return names_; }
  // FP4 rows, FP8 32 x 32 tiles, FP8 rows (the Engram tables) and 2-D BF16 weights (not the mHC
  // base, whose mean varies by column); host_rows generates on the calling thread.
  std::optional<RandomWeightRecipe> random_recipe(std::string_view weight) const override;
  std::string fingerprint() const override { return fingerprint_; }
  const WeightDigestReport& weight_digest_report() const override { return report_; }
  const std::vector<int64_t>& partial_layers() const override { return layers_; }
  std::span<const int64_t> engram_token_map() const override { return engram_map_; }
  std::vector<std::filesystem::path> files() const override { return {}; }

  // Bytes of generated weights held in host memory now (reports, tests).
  uint64_t resident_bytes() const;

 private:
  struct Entry {
    const TensorSpec* spec = nullptr;
    size_t tensor = 0;   // index into tensors_
    bool scale = false;  // the scale of that weight, not the weight
  };
  const Entry& entry(std::string_view name) const;
  void build_table();
  void compute_fingerprint();

  std::filesystem::path dir_;
  std::string config_text_;
  ModelConfig config_;
  std::vector<LayerRole> roles_;
  uint64_t seed_ = 0;
  int threads_ = 1;
  std::vector<int64_t> layers_;    // the closure; empty for the whole model
  std::vector<TensorSpec> specs_;  // never resized after build_table: tensors_ point into it
  std::vector<std::unique_ptr<SyntheticTensor>> tensors_;  // one per weight (with its scale)
  std::unordered_map<std::string_view, Entry> table_;      // every tensor name, scales included
  std::vector<std::string> names_;
  std::vector<int64_t> engram_map_;
  std::string fingerprint_;
  WeightDigestReport report_;
};

std::unique_ptr<SyntheticCheckpoint> open_synthetic_checkpoint(const std::filesystem::path& config,
                                                               const SyntheticWeights& weights);

// The checkpoint `model` names: a model directory (Checkpoint::open), or with `synthetic` a
// config.json or a directory holding one (open_synthetic_checkpoint).
std::unique_ptr<Checkpoint> open_checkpoint(const std::filesystem::path& model,
                                            const std::optional<SyntheticWeights>& synthetic);

}  // namespace flashdesk
