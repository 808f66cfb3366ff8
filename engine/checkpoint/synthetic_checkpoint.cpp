// SyntheticCheckpoint: the config, the table of make-random's tensors generated on first use, the
// random Engram map and the synthetic fingerprint.
#include "engine/checkpoint/synthetic_checkpoint.h"

#include <algorithm>
#include <thread>
#include <unordered_map>

#include "engine/checkpoint/engram_map.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/random_init.h"
#include "engine/checkpoint/synthetic_tensor.h"
#include "engine/util/error.h"
#include "engine/util/file_io.h"
#include "engine/util/kv_numerics_version.h"
#include "engine/util/sha256.h"

namespace flashdesk {
namespace {

std::filesystem::path config_file_of(const std::filesystem::path& config) {
  return std::filesystem::is_directory(config) ? config / "config.json" : config;
}

// "make-random seed 7" or "make-random seed 7, layers 2,3": what writes the same bytes.
std::string generator_text(uint64_t seed, const std::vector<int64_t>& layers) {
  std::string s = "make-random seed " + std::to_string(seed);
  for (size_t i = 0; i < layers.size(); ++i)
    s += (i == 0 ? ", layers " : ",") + std::to_string(layers[i]);
  return s;
}

}  // namespace

SyntheticCheckpoint::SyntheticCheckpoint(const std::filesystem::path& config,
                                         const SyntheticWeights& weights)
    : seed_(weights.seed),
      threads_(weights.threads > 0
                   ? weights.threads
                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
  const std::filesystem::path file = config_file_of(config);
  dir_ = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  config_text_ = read_small_file(file);
  config_ = parse_model_config(config_text_, file.string());
  if (config_.name.empty())
    config_.name = file.filename() == "config.json"
                       ? std::filesystem::absolute(dir_).filename().string()
                       : file.stem().string();
  roles_ = derive_layer_roles(config_.text);
  RandomTensorSet set = random_checkpoint_tensors(config_, weights.layers);
  layers_ = std::move(set.layers);
  specs_ = std::move(set.specs);
  build_table();
  engram_map_ = random_checkpoint_engram_map(config_.text, seed_);
  if (!engram_map_.empty()) validate_engram_token_map(engram_map_, config_.text, file.string());
  compute_fingerprint();
  report_.synthesised = generator_text(seed_, layers_);
}

void SyntheticCheckpoint::build_table() {
  const std::vector<RandomTensorPlan> plans = plan_random_tensors(specs_);
  for (size_t i = 0; i < plans.size(); ++i) {
    const RandomTensorPlan& p = plans[i];
    tensors_.push_back(std::make_unique<SyntheticTensor>(p, config_.text, seed_));
    table_.emplace(p.weight->name, Entry{p.weight, i, false});
    if (p.scale) table_.emplace(p.scale->name, Entry{p.scale, i, true});
  }
  for (const TensorSpec& s : specs_) {
    FD_CHECK(table_.contains(s.name), "synthetic checkpoint: no generator for " + s.name);
    names_.push_back(s.name);
  }
}

// The byte stream synthetic_checkpoint.h documents (and docs/checkpoint-format.md).
void SyntheticCheckpoint::compute_fingerprint() {
  Sha256 h;
  h.update("flashdesk-synthetic-fingerprint-v1\n");
  h.update_u64(kKvNumericsVersion);
  h.update_u64(kRandomWeightsVersion);
  h.update_u64(config_text_.size());
  h.update(config_text_);
  h.update_u64(seed_);
  h.update_u64(layers_.size());
  for (int64_t l : layers_) h.update_u64(static_cast<uint64_t>(l));
  fingerprint_ = Sha256::hex(h.finish());
}

const SyntheticCheckpoint::Entry& SyntheticCheckpoint::entry(std::string_view name) const {
  const auto it = table_.find(name);
  FD_CHECK(it != table_.end(),
           "no tensor " + std::string(name) + " in the synthetic checkpoint of " + dir_.string());
  return it->second;
}

TensorView SyntheticCheckpoint::tensor(std::string_view name) const {
  return tensor_drawn(name, {});
}

TensorView SyntheticCheckpoint::tensor_drawn(std::string_view name, const DrawInto& draw) const {
  const Entry& e = entry(name);
  const uint8_t* data = tensors_[e.tensor]->acquire(e.scale, threads_, draw);
  return TensorView{e.spec->name, e.spec->dtype, e.spec->shape, data,
                    static_cast<size_t>(e.spec->nbytes())};
}

std::optional<RandomWeightRecipe> SyntheticCheckpoint::random_recipe(
    std::string_view weight) const {
  using Format = RandomTensorPlan::Format;
  const auto it = table_.find(weight);
  if (it == table_.end() || it->second.scale) return std::nullopt;
  const RandomTensorPlan& p = tensors_[it->second.tensor]->plan();
  const bool drawable =
      p.format == Format::Fp4Rows || p.format == Format::Fp8Tiles || p.format == Format::Fp8Rows ||
      (p.format == Format::Plain && p.weight->dtype == DType::BF16 && p.weight->shape.size() == 2);
  const InitRule rule = init_rule(p.weight->name, p.cols, config_.text);
  if (!drawable || rule.hc_base) return std::nullopt;
  RandomWeightRecipe r;
  r.weight = p.weight->name;
  if (p.scale) r.scale = p.scale->name;
  r.format = p.format;
  r.dtype = p.weight->dtype;
  r.rows = p.rows;
  r.cols = p.cols;
  r.stream = tensor_stream(seed_, p.weight->name);
  r.std = rule.std;
  r.mean = rule.mean;
  r.host_rows = [&p, &text = config_.text, seed = seed_](int64_t r0, int64_t r1, uint8_t* w,
                                                         uint8_t* s) {
    write_random_rows(p, text, seed, r0, r1, w, s);
  };
  return r;
}

uint64_t SyntheticCheckpoint::resident_bytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors_) total += t->resident_bytes();
  return total;
}

std::unique_ptr<SyntheticCheckpoint> open_synthetic_checkpoint(const std::filesystem::path& config,
                                                               const SyntheticWeights& weights) {
  return std::make_unique<SyntheticCheckpoint>(config, weights);
}

std::unique_ptr<Checkpoint> open_checkpoint(const std::filesystem::path& model,
                                            const std::optional<SyntheticWeights>& synthetic) {
  if (synthetic) return open_synthetic_checkpoint(model, *synthetic);
  return Checkpoint::open(model);
}

}  // namespace flashdesk
