// Model-load progress (engine/model/load_progress.h) on the demo model (two shards and the DSpark
// head's model-dspark.safetensors): the reports never go back, the per-tensor ones alone add up
// to the total (so the total is what is read), the last one says done == total, and every shard
// is reported on.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/checkpoint/shard_index.h"
#include "engine/runtime/chat_engine.h"

namespace flashdesk {
namespace {

const std::filesystem::path kDemo =
    std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny";

EngineOptions on(const char* backend) {
  EngineOptions options;
  options.backend = backend;
  options.threads = 1;
  return options;
}

struct Report {
  uint64_t done;
  uint64_t total;
  std::string tensor;
};

std::vector<Report> load_and_record(const EngineOptions& options) {
  std::vector<Report> reports;
  auto engine = ChatEngine::load(kDemo, options, [&reports](const LoadProgress& p) {
    reports.push_back({p.done_bytes, p.total_bytes, std::string(p.tensor)});
  });
  EXPECT_NE(engine, nullptr);
  return reports;
}

TEST(LoadProgress, MonotonicEndsAtTotalAndCoversEveryShard) {
  const std::vector<Report> reports = load_and_record(on("cpu-reference"));
  ASSERT_GE(reports.size(), 2u);
  const uint64_t total = reports.front().total;
  EXPECT_GT(total, uint64_t{20} << 20);  // the demo's weights are ~24 MB
  uint64_t previous = 0;
  for (const Report& r : reports) {
    EXPECT_EQ(r.total, total);
    EXPECT_GE(r.done, previous) << r.tensor;
    EXPECT_LE(r.done, total) << r.tensor;
    previous = r.done;
  }
  // The final report names no tensor; the one before it (the last tensor) already reached the
  // total, so the bar does not jump at the end.
  EXPECT_EQ(reports.back().done, total);
  EXPECT_TRUE(reports.back().tensor.empty());
  EXPECT_EQ(reports[reports.size() - 2].done, total);

  const ShardIndex index = find_shards(kDemo);
  ASSERT_EQ(index.shards.size(), 3u);  // the main model's two and the DSpark head's
  std::map<std::string, int> calls_per_shard;
  std::set<std::string> tensors;
  for (const Report& r : reports) {
    if (r.tensor.empty()) continue;
    EXPECT_TRUE(tensors.insert(r.tensor).second) << r.tensor << " reported twice";
    const auto shard = index.weight_map.find(r.tensor);
    ASSERT_NE(shard, index.weight_map.end()) << r.tensor;
    ++calls_per_shard[shard->second];
  }
  for (const std::string& shard : index.shards) {
    EXPECT_GT(calls_per_shard[shard], 10) << shard << " was hardly reported on";
    std::printf("%s: %d reports\n", shard.c_str(), calls_per_shard[shard]);
  }
  std::printf("%zu reports, %llu bytes\n", reports.size(), static_cast<unsigned long long>(total));
}

TEST(LoadProgress, SameReportsOnBothCpuBackends) {
  const auto reference = load_and_record(on("cpu-reference"));
  const auto optimised = load_and_record(on("cpu"));
  ASSERT_EQ(reference.size(), optimised.size());
  EXPECT_EQ(reference.back().total, optimised.back().total);
}

TEST(LoadProgress, NoCallbackIsFine) {
  EXPECT_NE(ChatEngine::load(kDemo, on("cpu-reference")), nullptr);
}

}  // namespace
}  // namespace flashdesk
