// Writes a random checkpoint directory in exactly the published format for any config:
// config.json (copied byte for byte), model.safetensors or shards + index, and for Engram models
// engram_map.safetensors (a random token map, the official multipliers). Weights are drawn at
// sensible scales (random_init.h) and quantised as real checkpoints are (FP8 32x32 UE8M0 tiles, FP4
// experts with per-32 E8M0 scales). Tensors are generated in row chunks on several threads and
// streamed to disk, so a full-size layer never has to fit in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/tensor_spec.h"

namespace flashdesk {

struct RandomCheckpointOptions {
  uint64_t seed = 0;
  // Empty: the whole model. Else a partial checkpoint of these main layers plus their source
  // layers, embed, norm and head (marked in the metadata; open with allow_partial).
  std::vector<int64_t> layers;
  // Largest shard; 0 picks one model.safetensors up to 4 GiB, 4 GiB shards above.
  uint64_t shard_bytes = 0;
  int threads = 0;                                   // 0: all hardware threads
  std::function<void(const std::string&)> progress;  // one line per file written
  // Headers and file sizes only: tensor bytes are holes (zeros) in sparse files. Lets tests
  // open and validate a full-size layout (475 GiB) that takes megabytes of disk.
  bool skeleton = false;
};

struct RandomCheckpointSummary {
  int64_t tensors = 0;
  uint64_t bytes = 0;              // all safetensors files (shards + Engram map)
  std::vector<std::string> files;  // written, relative to the directory
  std::vector<int64_t> layers;     // partial: the layers held; empty when complete
};

// The tensors a random checkpoint holds: every expected tensor, or for `layers` (non-empty) the
// partial set of their closure (partial_layer_closure; InvalidRequest for a layer that does not
// exist). The synthetic checkpoint (synthetic_checkpoint.h) holds the same.
struct RandomTensorSet {
  std::vector<int64_t> layers;  // the closure; empty for the whole model
  std::vector<TensorSpec> specs;
};
RandomTensorSet random_checkpoint_tensors(const ModelConfig& config,
                                          const std::vector<int64_t>& layers);

// The Engram token map a random checkpoint of an Engram config holds (empty for other configs).
std::vector<int64_t> random_checkpoint_engram_map(const TextConfig& text, uint64_t seed);

RandomCheckpointSummary write_random_checkpoint(const std::filesystem::path& config_path,
                                                const std::filesystem::path& out_dir,
                                                const RandomCheckpointOptions& options);

// A deterministic Engram token map for tests: vocab_size entries, exactly
// engram_compressed_vocab_size distinct ids numbered by first occurrence, the rest of the tokens
// merged into uniformly chosen earlier ids.
std::vector<int64_t> random_engram_token_map(int64_t vocab_size, int64_t compressed_size,
                                             uint64_t seed);

}  // namespace flashdesk
