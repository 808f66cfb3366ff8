// A model opened for inference: config.json and the validated tensor table. Checkpoint::open
// maps a directory's safetensors shards (never read whole); open_synthetic_checkpoint
// (synthetic_checkpoint.h) generates make-random's bytes in memory instead. The model code reads
// weights only through this.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/random_recipe.h"
#include "engine/checkpoint/tensor_spec.h"
#include "engine/checkpoint/weight_digest.h"
#include "engine/checkpoint/weight_digest_cache.h"
#include "engine/util/dtype.h"

namespace flashdesk {

// A tensor inside a mapped shard. Valid as long as the Checkpoint lives. `data` is only
// guaranteed byte-aligned (files written by flashdesk and by the safetensors library align each
// tensor to its element size, but a hand-made file need not).
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

struct CheckpointOptions {
  // Accept a partial checkpoint (`make-random --layers`: some main layers plus embed, norm and
  // head, marked in every shard's metadata); it is then validated against that subset.
  bool allow_partial = false;
  // Safetensors files up to this size are read into memory, larger ones mapped (mapped_file.h:
  // a copied file may be truncated or rewritten while the model runs).
  uint64_t copy_files_up_to = kDefaultCopyLimit;
  // Where the weights' digests are cached by file identity (weight_digest_cache.h); empty: no
  // cache, every open reads every byte.
  std::filesystem::path digest_cache = default_weight_digest_cache();
};

// Metadata key (in every shard's __metadata__) listing the main layers a partial checkpoint
// holds, comma-separated, ascending.
inline constexpr std::string_view kPartialLayersKey = "flashdesk.partial_layers";
// The Engram token map beside the shards (docs/checkpoint-format.md).
inline constexpr std::string_view kEngramMapFile = "engram_map.safetensors";

class Checkpoint {
 public:
  // Reads config.json, maps model.safetensors.index.json's shards (preferred when both exist)
  // or model.safetensors, and validates them against expected_tensors(): every missing, unknown,
  // mis-shaped or mis-typed tensor is listed by name in one FormatError. A missing shard is
  // named; an engram_map.safetensors present is validated too.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& dir,
                                          const CheckpointOptions& options = {});

  virtual ~Checkpoint() = default;
  virtual const std::filesystem::path& dir() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual const std::vector<LayerRole>& roles() const = 0;
  virtual bool has(std::string_view name) const = 0;
  // The named tensor; a missing name is a bug (the directory was validated at open). Safe to
  // call from several threads (the ranks of a RankGroup load at once). A synthetic checkpoint
  // generates the bytes here on first use.
  virtual TensorView tensor(std::string_view name) const = 0;
  // The named tensor's name, dtype and shape, without reading or generating its bytes.
  virtual TensorSpec tensor_spec(std::string_view name) const = 0;
  // Says that the caller of one earlier tensor(name) holds no pointer into its bytes any more (a
  // backend copied them). A file checkpoint ignores it (the mapping stays; the OS pages). A
  // synthetic one frees a weight's bytes (with its scale's) once every tensor() of them has been
  // released, and generates them again if asked after that; a caller that never releases keeps
  // them for the checkpoint's life. Releasing more often than tensor() was called is a bug.
  virtual void release_tensor(std::string_view name) const { (void)name; }
  virtual std::vector<std::string> tensor_names() const = 0;
  // For a weight whose bytes are generated rather than read (a synthetic checkpoint's FP4 rows,
  // FP8 tiles, BF16 matrices and Engram tables): how a backend may draw them itself
  // (Backend::draw_linear, draw_into_host) instead of calling tensor(). Empty for every weight of a
  // file.
  virtual std::optional<RandomWeightRecipe> random_recipe(std::string_view weight) const {
    (void)weight;
    return std::nullopt;
  }
  // tensor(name), except that a synthetic checkpoint that has yet to generate the bytes lets
  // `draw` write them (the weight's and its scale's) first; where it returns false the host
  // generates them as tensor() does. A file's tensor is read as tensor() reads it.
  using DrawInto = std::function<bool(uint8_t* weight, uint8_t* scale)>;
  virtual TensorView tensor_drawn(std::string_view name, const DrawInto& draw) const {
    (void)draw;
    return tensor(name);
  }
  // What keys cached KV: a SHA-256 (64 lower-case hex digits) over the engine's
  // kKvNumericsVersion, config.json, and every safetensors file's name, size, header and content
  // digest (weight_digest.h), so any changed weight byte, or an engine whose KV numerics changed,
  // gives another fingerprint. docs/checkpoint-format.md gives the byte stream.
  virtual std::string fingerprint() const = 0;
  // How the content digests were obtained at open (files hashed, from the cache, speed); for a
  // synthetic checkpoint, `synthesised` says so and nothing was digested.
  virtual const WeightDigestReport& weight_digest_report() const = 0;
  // The main layers held when partial (ascending); empty for a complete checkpoint.
  virtual const std::vector<int64_t>& partial_layers() const = 0;
  // The Engram compressed-token map (one id per token id), empty when the file is absent.
  virtual std::span<const int64_t> engram_token_map() const = 0;
  // The safetensors files mapped (shards, then the Engram map), for reports; none when synthetic.
  virtual std::vector<std::filesystem::path> files() const = 0;
};

}  // namespace flashdesk
