// The placement planner (engine/placement/placement_plan.h) on the full V4.1-Flash config and on
// flash-tiny, over machines from one small GPU to eight H200s: every byte placed once, each tier
// within its size, the order of the rule (dense parts, then experts layer by layer, Engram tables
// in host memory, the SSD last), and a roofline that never gets slower with more GPUs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/checkpoint/config.h"
#include "engine/placement/auto_placement.h"
#include "engine/placement/placement_plan.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

ModelConfig full_config() {
  return load_model_config(
      (std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/deepseek-v4.1-flash.json").string());
}

MachineSpec machine(int gpus, uint64_t gpu_gib, uint64_t host_gib) {
  MachineSpec m;
  m.gpu_bytes.assign(static_cast<size_t>(gpus), gpu_gib * kGiB);
  m.host_bytes = host_gib * kGiB;
  return m;
}

// Every byte of the model sits in exactly one row; GPU rows fit the GPU after its reserve, host
// rows the host memory.
void expect_consistent(const PlacementPlan& p, const MachineSpec& m, const std::string& what) {
  uint64_t placed = 0, host = 0, ssd = 0;
  for (const PlacedPart& part : p.parts) {
    placed += part.bytes;
    if (part.tier == Tier::Host) host += part.bytes;
    if (part.tier == Tier::Ssd) ssd += part.bytes;
    EXPECT_GE(part.read_per_token, 0.0) << what << ": " << part.what;
  }
  EXPECT_EQ(placed, p.model_bytes) << what;
  EXPECT_EQ(host, p.host_used) << what;
  EXPECT_EQ(ssd, p.ssd_bytes) << what;
  EXPECT_LE(p.host_used, m.host_bytes) << what;
  if (!m.gpu_bytes.empty()) {
    EXPECT_LE(p.gpu_busiest + m.gpu_reserve, m.gpu_bytes[0]) << what;
  }
  EXPECT_GT(p.decode_seconds, 0.0) << what;
}

bool has_part(const PlacementPlan& p, const std::string& prefix, Tier tier) {
  for (const PlacedPart& part : p.parts)
    if (part.what.starts_with(prefix) && part.tier == tier) return true;
  return false;
}

TEST(PlacementPlan, EightH200sHoldEveryExpertAndLeaveEngramInHostMemory) {
  const ModelConfig c = full_config();
  const MachineSpec m = machine(8, 141, 512);
  const PlacementPlan p = plan_placement(c, m);
  expect_consistent(p, m, "8 x H200");
  EXPECT_EQ(p.dense_layers_on_gpu, c.text.num_hidden_layers);
  EXPECT_EQ(p.expert_layers_on_gpu, c.text.num_hidden_layers);
  EXPECT_TRUE(has_part(p, "Engram tables", Tier::Host));
  EXPECT_EQ(p.ssd_bytes, 0u);
  EXPECT_GT(p.model_bytes, 470 * kGiB);  // the published 475 GiB
  EXPECT_LT(p.model_bytes, 480 * kGiB);
}

TEST(PlacementPlan, OneH200KeepsTheFirstExpertLayersAndTheCpuComputesTheRest) {
  const ModelConfig c = full_config();
  const MachineSpec m = machine(1, 141, 512);
  const PlacementPlan p = plan_placement(c, m);
  expect_consistent(p, m, "1 x H200 + 512 GiB");
  EXPECT_EQ(p.dense_layers_on_gpu, c.text.num_hidden_layers);
  EXPECT_GT(p.expert_layers_on_gpu, 0);
  EXPECT_LT(p.expert_layers_on_gpu, c.text.num_hidden_layers);
  EXPECT_TRUE(has_part(p, "routed experts, layers 0-", Tier::Gpu));
  EXPECT_TRUE(has_part(p, "routed experts", Tier::Host));
  EXPECT_EQ(p.ssd_bytes, 0u);
  EXPECT_GT(p.host_read, 0.0);
}

TEST(PlacementPlan, AGpuTooSmallForTheDensePartsHandsTrailingLayersToTheCpu) {
  const ModelConfig c = full_config();
  const MachineSpec m = machine(1, 14, 512);  // 6 GiB after the reserve
  const PlacementPlan p = plan_placement(c, m);
  expect_consistent(p, m, "1 x 14 GiB");
  EXPECT_GT(p.dense_layers_on_gpu, 0);
  EXPECT_LT(p.dense_layers_on_gpu, c.text.num_hidden_layers);
  EXPECT_EQ(p.expert_layers_on_gpu, 0);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes[0].find("run on the CPU"), std::string::npos) << p.notes[0];
}

TEST(PlacementPlan, ShortHostMemorySendsEngramTablesToTheSsdBeforeExperts) {
  const ModelConfig c = full_config();
  const MachineSpec m = machine(2, 48, 256);
  const PlacementPlan p = plan_placement(c, m);
  expect_consistent(p, m, "2 x 48 GiB + 256 GiB");
  EXPECT_GT(p.ssd_bytes, 0u);
  EXPECT_TRUE(has_part(p, "Engram tables", Tier::Ssd));
  EXPECT_FALSE(has_part(p, "routed experts", Tier::Ssd));
  EXPECT_EQ(p.host_used, m.host_bytes);
}

TEST(PlacementPlan, MoreGpusNeverMakeTheRooflineSlower) {
  const ModelConfig c = full_config();
  double previous = 1e30;
  for (const int gpus : {0, 1, 2, 4, 8}) {
    const MachineSpec m = machine(gpus, 141, 512);
    const PlacementPlan p = plan_placement(c, m);
    expect_consistent(p, m, std::to_string(gpus) + " GPUs");
    EXPECT_LT(p.decode_seconds, previous) << gpus << " GPUs";
    previous = p.decode_seconds;
  }
}

TEST(PlacementPlan, WithoutGpusTheCpuComputesEverything) {
  const ModelConfig c = load_model_config(
      (std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny/config.json").string());
  const MachineSpec m = machine(0, 0, 16);
  const PlacementPlan p = plan_placement(c, m);
  expect_consistent(p, m, "flash-tiny, no GPU");
  for (const PlacedPart& part : p.parts) EXPECT_EQ(part.tier, Tier::Host) << part.what;
  const std::string text = describe_plan(c, m, p);
  EXPECT_NE(text.find("no GPU: the CPU computes everything"), std::string::npos) << text;
  EXPECT_NE(text.find("tokens/s"), std::string::npos) << text;
}

// One GPU's automatic placement (auto_placement.h): an H200 keeps the dense parts and the
// experts of the first layers, the rest in host memory, as the plan says; a GPU that holds
// everything moves nothing; one that cannot hold the dense parts is refused before any upload.
TEST(AutoPlacement, OneH200KeepsTheFirstLayersExpertsAndSaysWhereTheRestWent) {
  const ModelConfig c = full_config();
  const ExpertPlacement p = place_experts_for_one_gpu(c, 141 * kGiB, 512 * kGiB);
  const PlacementPlan plan = plan_placement(c, machine(1, 141, 512));
  EXPECT_EQ(p.host_experts_from, plan.expert_layers_on_gpu);
  EXPECT_GT(p.host_experts_from, 0);
  EXPECT_LT(p.host_experts_from, c.text.num_hidden_layers);
  EXPECT_NE(p.summary.find("routed experts of layers " + std::to_string(p.host_experts_from) + "-" +
                           std::to_string(c.text.num_hidden_layers - 1)),
            std::string::npos)
      << p.summary;
}

TEST(AutoPlacement, AGpuThatHoldsTheModelMovesNothing) {
  const ExpertPlacement p = place_experts_for_one_gpu(full_config(), 2048 * kGiB, 64 * kGiB);
  EXPECT_EQ(p.host_experts_from, -1);
  EXPECT_TRUE(p.summary.empty()) << p.summary;
}

TEST(AutoPlacement, AGpuTooSmallForTheDenseLayersIsRefusedWithTheSizes) {
  try {
    place_experts_for_one_gpu(full_config(), 12 * kGiB, 512 * kGiB);
    FAIL() << "a 12 GiB GPU cannot hold V4.1-Flash's dense parts";
  } catch (const InvalidRequest& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not fit this GPU"), std::string::npos) << what;
    EXPECT_NE(what.find("12.0 GiB free"), std::string::npos) << what;
    EXPECT_NE(what.find("inspect --plan"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace flashdesk
