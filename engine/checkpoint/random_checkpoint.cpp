// Plans shards for a random checkpoint, streams each through the job pool, then writes the
// index, the Engram token map and config.json.
#include "engine/checkpoint/random_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/engram_map.h"
#include "engine/checkpoint/engram_multipliers.h"
#include "engine/checkpoint/random_init.h"
#include "engine/checkpoint/random_tensor_writer.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/util/error.h"
#include "engine/util/file_io.h"

namespace flashdesk {
namespace {

constexpr uint64_t kAutoShardBytes = uint64_t{4} << 30;

// Groups of specs (a weight and its scale stay together) cut at `limit` bytes.
std::vector<std::vector<TensorSpec>> split_into_shards(const std::vector<TensorSpec>& specs,
                                                       uint64_t limit) {
  std::vector<std::vector<TensorSpec>> shards(1);
  uint64_t used = 0;
  for (size_t i = 0; i < specs.size();) {
    size_t end = i + 1;
    if (end < specs.size() && specs[end].dtype == DType::F8_E8M0) ++end;  // the weight's scale
    uint64_t bytes = 0;
    for (size_t j = i; j < end; ++j) bytes += specs[j].nbytes();
    if (used > 0 && used + bytes > limit) {
      shards.emplace_back();
      used = 0;
    }
    for (size_t j = i; j < end; ++j) shards.back().push_back(specs[j]);
    used += bytes;
    i = end;
  }
  return shards;
}

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

std::string layer_list_text(const std::vector<int64_t>& layers) {
  std::string s;
  for (int64_t l : layers) {
    if (!s.empty()) s.push_back(',');
    s.append(std::to_string(l));
  }
  return s;
}

uint64_t write_shard(const std::filesystem::path& path, const std::vector<TensorSpec>& specs,
                     const std::map<std::string, std::string>& metadata, const ModelConfig& config,
                     const RandomCheckpointOptions& options, int threads) {
  SafetensorsWriter writer(path, specs, metadata);
  if (options.skeleton) {
    writer.commit_with_holes();
    return writer.file_size();
  }
  std::vector<std::function<void()>> jobs;
  for (const RandomTensorPlan& plan : plan_random_tensors(specs))
    add_random_tensor_jobs(plan, config.text, options.seed, writer, kRandomElementsPerJob, jobs);
  run_jobs(jobs, threads);
  writer.commit();
  return writer.file_size();
}

// "model-00001-of-00048.safetensors": the shard names this writer (and the HF tools) use.
bool is_shard_name(std::string_view name) {
  constexpr std::string_view kPattern = "model-#####-of-#####.safetensors";
  if (name.size() != kPattern.size()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (kPattern[i] == '#' ? !std::isdigit(static_cast<unsigned char>(name[i]))
                           : name[i] != kPattern[i])
      return false;
  return true;
}

// Removes model files of an earlier layout that this run did not write.
void remove_stale_files(const std::filesystem::path& dir, const std::set<std::string>& keep) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool ours = name == "model.safetensors" || name == "model.safetensors.index.json" ||
                      name == kEngramMapFile || is_shard_name(name);
    if (ours && !keep.contains(name)) std::filesystem::remove(entry.path());
  }
}

}  // namespace

std::vector<int64_t> random_engram_token_map(int64_t vocab_size, int64_t compressed_size,
                                             uint64_t seed) {
  SplitMix64 rng(row_seed(seed, "engram_map", 0));
  std::vector<int64_t> map(static_cast<size_t>(vocab_size));
  int64_t next_new = 0;
  for (int64_t token = 0; token < vocab_size; ++token) {
    const int64_t need = compressed_size - next_new, left = vocab_size - token;
    // A new id with probability need/left: forced when every remaining token must be new.
    const bool fresh = next_new == 0 || (need > 0 && rng.uniform() * static_cast<double>(left) <
                                                         static_cast<double>(need));
    if (fresh) {
      map[token] = next_new++;
    } else {
      map[token] = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(next_new));
    }
  }
  return map;
}

RandomTensorSet random_checkpoint_tensors(const ModelConfig& config,
                                          const std::vector<int64_t>& layers) {
  RandomTensorSet set;
  if (layers.empty()) {
    set.specs = expected_tensors(config);
  } else {
    set.layers = partial_layer_closure(config, layers);
    set.specs = expected_partial_tensors(config, set.layers);
  }
  return set;
}

std::vector<int64_t> random_checkpoint_engram_map(const TextConfig& text, uint64_t seed) {
  if (text.engram_layer_ids.empty()) return {};
  // One entry per token of a tokenizer this checkpoint does not have: vocab_size of them, or
  // more when the config's compressed vocabulary is larger (the official code allows that).
  return random_engram_token_map(std::max(text.vocab_size, text.engram_compressed_vocab_size),
                                 text.engram_compressed_vocab_size, seed);
}

RandomCheckpointSummary write_random_checkpoint(const std::filesystem::path& config_path,
                                                const std::filesystem::path& out_dir,
                                                const RandomCheckpointOptions& options) {
  const std::string config_text = read_small_file(config_path);
  const ModelConfig config = parse_model_config(config_text, config_path.string());
  RandomCheckpointSummary summary;
  RandomTensorSet set = random_checkpoint_tensors(config, options.layers);
  summary.layers = std::move(set.layers);
  const std::vector<TensorSpec>& specs = set.specs;
  summary.tensors = static_cast<int64_t>(specs.size());
  uint64_t total = 0;
  for (const TensorSpec& s : specs) total += s.nbytes();
  const uint64_t limit = options.shard_bytes > 0    ? options.shard_bytes
                         : total <= kAutoShardBytes ? total + 1
                                                    : kAutoShardBytes;
  const auto shards = split_into_shards(specs, limit);
  const int threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"flashdesk.generator",
       std::string(options.skeleton ? "make-random --skeleton" : "make-random") + " seed " +
           std::to_string(options.seed)}};
  if (!summary.layers.empty())
    metadata[std::string(kPartialLayersKey)] = layer_list_text(summary.layers);

  std::filesystem::create_directories(out_dir);
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        shards.size() == 1 ? "model.safetensors" : shard_name(i, shards.size());
    summary.bytes += write_shard(out_dir / name, shards[i], metadata, config, options, threads);
    summary.files.push_back(name);
    for (const TensorSpec& s : shards[i]) weight_map[s.name] = name;
    if (options.progress)
      options.progress("wrote " + name + " (" + std::to_string(shards[i].size()) + " tensors)");
  }
  if (shards.size() > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    if (!summary.layers.empty())
      index["metadata"][std::string(kPartialLayersKey)] = metadata[std::string(kPartialLayersKey)];
    write_file_atomic(out_dir / "model.safetensors.index.json", index.dump(2) + "\n");
    summary.files.push_back("model.safetensors.index.json");
  }
  if (!config.text.engram_layer_ids.empty()) {
    const auto map = random_checkpoint_engram_map(config.text, options.seed);
    write_engram_map(out_dir / kEngramMapFile, map, engram_multipliers(config.text));
    summary.bytes += std::filesystem::file_size(out_dir / kEngramMapFile);
    summary.files.push_back(std::string(kEngramMapFile));
  }
  write_file_atomic(out_dir / "config.json", config_text);
  summary.files.push_back("config.json");
  remove_stale_files(out_dir, {summary.files.begin(), summary.files.end()});
  return summary;
}

}  // namespace flashdesk
