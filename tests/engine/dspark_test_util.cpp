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
    const fs::path tiny = fs::path(FD_SOURCE_DIR) / "assets/models/flash-tiny";
    fs::create_directories(model);
    for (const auto& e : fs::directory_iterator(tiny))
      fs::create_symlink(e.path(), model / e.path().filename());
    // The config with stages, then a whole random checkpoint of it for its mtp.* tensors.
    nlohmann::json j = nlohmann::json::parse(std::ifstream(tiny / "config.json"));
    const int64_t vocab = j["text_config"]["vocab_size"];
    add_dspark_stages(j["text_config"], {9, 10, 11}, 64, vocab - 1);
    fs::remove(model / "config.json");
    std::ofstream(model / "config.json") << j.dump(2);
    RandomCheckpointOptions o;
    o.seed = 4;
    write_random_checkpoint(model / "config.json", dir.path() / "random", o);
    std::shared_ptr<const Checkpoint> random = Checkpoint::open(dir.path() / "random");
    std::vector<TensorData> head;
    for (const std::string& name : random->tensor_names()) {
      if (!name.starts_with("mtp.")) continue;
      const TensorView v = random->tensor(name);
      head.push_back(
          TensorData{name, v.dtype, {v.shape.begin(), v.shape.end()}, {v.data, v.data + v.nbytes}});
    }
    const std::string shard = "model-dspark.safetensors";
    write_safetensors(model / shard, head);
    nlohmann::json index =
        nlohmann::json::parse(std::ifstream(tiny / "model.safetensors.index.json"));
    for (const TensorData& t : head) {
      index["weight_map"][t.name] = shard;
      index["metadata"]["total_size"] =
          index["metadata"]["total_size"].get<int64_t>() + static_cast<int64_t>(t.bytes.size());
    }
    fs::remove(model / "model.safetensors.index.json");
    std::ofstream(model / "model.safetensors.index.json") << index.dump(1);
    return true;
  }();
  (void)made;
  return model;
}

}  // namespace flashdesk::test
