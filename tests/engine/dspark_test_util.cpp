// Writes the DSpark variant of the every-role config and its random checkpoint.
#include "tests/engine/dspark_test_util.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/random_checkpoint.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk::test {

const std::filesystem::path& dspark_every_role_dir() {
  static ::flashdesk::testing::TempDir dir;
  static const bool made = [] {
    const auto base = std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/test-every-role.json";
    nlohmann::json j = nlohmann::json::parse(std::ifstream(base));
    auto& t = j["text_config"];
    t["num_nextn_predict_layers"] = 3;
    for (int i = 0; i < 3; ++i) t["compress_ratios"].push_back(0);  // stages: window only
    t["dspark_block_size"] = 5;
    t["dspark_noise_token_id"] = 510;
    t["dspark_target_layer_ids"] = {11, 12, 13};
    t["dspark_markov_rank"] = 32;
    t["dspark_num_experts_per_tok"] = 3;
    const auto config = dir.path() / "source-config.json";
    std::ofstream(config) << j.dump(2);
    RandomCheckpointOptions o;
    o.seed = 3;
    write_random_checkpoint(config, dir.path() / "model", o);
    return true;
  }();
  (void)made;
  static const std::filesystem::path model = dir.path() / "model";
  return model;
}

}  // namespace flashdesk::test
