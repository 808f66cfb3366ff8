// Writes the DSpark variant of the every-role config and its random checkpoint.
#include "tests/engine/dspark_test_util.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk::test {
namespace {

constexpr const char* kDsparkShard = "model-dspark.safetensors";

// The files a DSpark head export brings (tools/train/dspark_export.py HEAD_FILES).
bool is_dspark_head_file(const std::string& name) {
  return name == "config.json" || name == "model.safetensors.index.json" || name == kDsparkShard;
}

// A text config as the target alone: no stages, one compress ratio per main layer.
void remove_dspark_stages(nlohmann::json& t) {
  t["num_nextn_predict_layers"] = 0;
  std::vector<int64_t> ratios = t["compress_ratios"];
  ratios.resize(t["num_hidden_layers"].get<size_t>());
  t["compress_ratios"] = ratios;
  for (const char* key : {"dspark_block_size", "dspark_target_layer_ids", "dspark_markov_rank",
                          "dspark_n_routed_experts", "dspark_num_experts_per_tok"})
    t.erase(key);
}

void add_dspark_stages(nlohmann::json& t, std::vector<int64_t> targets, int64_t rank,
                       int64_t noise) {
  t["num_nextn_predict_layers"] = 3;
  for (int i = 0; i < 3; ++i) t["compress_ratios"].push_back(0);  // stages: window only
  t["dspark_block_size"] = 5;
  t["dspark_noise_token_id"] = noise;
  t["dspark_target_layer_ids"] = targets;
  t["dspark_markov_rank"] = rank;
  t["dspark_num_experts_per_tok"] = 3;
}

}  // namespace

void write_flash_tiny_target(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const fs::path tiny = fs::path(FD_SOURCE_DIR) / "assets/models/flash-tiny";
  for (const auto& e : fs::directory_iterator(tiny))
    if (!is_dspark_head_file(e.path().filename().string()))
      fs::create_symlink(e.path(), dir / e.path().filename());
  nlohmann::json config = nlohmann::json::parse(std::ifstream(tiny / "config.json"));
  remove_dspark_stages(config["text_config"]);
  std::ofstream(dir / "config.json") << config.dump(2);
  nlohmann::json index =
      nlohmann::json::parse(std::ifstream(tiny / "model.safetensors.index.json"));
  nlohmann::json weight_map = nlohmann::json::object();
  for (const auto& [name, shard] : index["weight_map"].items())
    if (!name.starts_with("mtp.")) weight_map[name] = shard;
  index["weight_map"] = weight_map;
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(1);
}

const std::filesystem::path& dspark_every_role_dir() {
  static ::flashdesk::testing::TempDir dir;
  static const bool made = [] {
    RandomCheckpointOptions o;
    o.seed = 3;
    write_random_checkpoint(
        std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/test-dspark.json", dir.path(), o);
    return true;
  }();
  (void)made;
  return dir.path();
}

const std::filesystem::path& flash_tiny_with_random_head_dir() {
  namespace fs = std::filesystem;
  static ::flashdesk::testing::TempDir dir;
  static const fs::path model = dir.path() / "model";
  static const bool made = [] {
    fs::create_directories(model);
    // The target alone (the head's three files are written here as regular files: writing
    // through a link to a shipped head would overwrite it), then the config with these stages
    // and a whole random checkpoint of it for its mtp.* tensors.
    write_flash_tiny_target(model);
    nlohmann::json j = nlohmann::json::parse(std::ifstream(model / "config.json"));
    nlohmann::json& t = j["text_config"];
    const int64_t vocab = t["vocab_size"];
    add_dspark_stages(t, {9, 10, 11}, 64, vocab - 1);
    std::ofstream(model / "config.json") << j.dump(2);
    RandomCheckpointOptions o;
    o.seed = 4;
    write_random_checkpoint(model / "config.json", dir.path() / "random", o);
    std::shared_ptr<const Checkpoint> random = Checkpoint::open(dir.path() / "random");
    std::vector<TensorData> head;
    int64_t total = 0;  // every tensor of this config, as an index's total_size counts them
    for (const std::string& name : random->tensor_names()) {
      const TensorView v = random->tensor(name);
      total += static_cast<int64_t>(v.nbytes);
      if (!name.starts_with("mtp.")) continue;
      head.push_back(
          TensorData{name, v.dtype, {v.shape.begin(), v.shape.end()}, {v.data, v.data + v.nbytes}});
    }
    write_safetensors(model / kDsparkShard, head);
    // The target's index plus this head's entries. The random checkpoint has every tensor of
    // this config with the same shape and dtype as the model here.
    nlohmann::json index =
        nlohmann::json::parse(std::ifstream(model / "model.safetensors.index.json"));
    nlohmann::json weight_map = index["weight_map"];
    for (const TensorData& h : head) weight_map[h.name] = kDsparkShard;
    index["weight_map"] = weight_map;
    index["metadata"]["total_size"] = total;
    std::ofstream(model / "model.safetensors.index.json") << index.dump(1);
    return true;
  }();
  (void)made;
  return model;
}

}  // namespace flashdesk::test
