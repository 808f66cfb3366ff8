// The every-role random checkpoint and small helpers shared by the model tests.
#include "tests/engine/model_test_util.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace flashdesk::test {

const std::filesystem::path& every_role_model_dir() {
  static TempDir dir;
  static const bool made = [] {
    RandomCheckpointOptions o;
    o.seed = 1;
    write_random_checkpoint(
        std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/test-every-role.json", dir.path(),
        o);
    return true;
  }();
  (void)made;
  return dir.path();
}

LoadedModel load_every_role(int threads, const ModelOptions& options) {
  LoadedModel m;
  m.backend = std::make_unique<CpuReferenceBackend>(threads);
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(every_role_model_dir());
  m.model = std::make_unique<Model>(ckpt, *m.backend, options);
  return m;
}

std::vector<int32_t> test_prompt(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = pick(rng);
  return ids;
}

}  // namespace flashdesk::test
