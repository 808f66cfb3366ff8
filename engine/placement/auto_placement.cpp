// One GPU's expert placement from the planner (auto_placement.h).
#include "engine/placement/auto_placement.h"

#include <cstdio>

#include "engine/placement/placement_plan.h"
#include "engine/util/error.h"

namespace flashdesk {

namespace {

std::string gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / double(1ull << 30));
  return b;
}

}  // namespace

ExpertPlacement place_experts_for_one_gpu(const ModelConfig& config, uint64_t gpu_free,
                                          uint64_t host_bytes, uint64_t gpu_reserve) {
  MachineSpec machine;
  machine.gpu_bytes = {gpu_free};
  machine.host_bytes = host_bytes;
  machine.gpu_reserve = gpu_reserve;
  const PlacementPlan plan = plan_placement(config, machine);
  const int64_t layers = plan.layers;
  if (plan.dense_layers_on_gpu < layers)
    throw InvalidRequest(
        "the model does not fit this GPU: " + gib(gpu_free) + " free (" + gib(gpu_reserve) +
        " kept for the KV cache) holds the attention and dense parts of " +
        std::to_string(plan.dense_layers_on_gpu) + " of its " + std::to_string(layers) +
        " layers even with every routed expert in host memory; use the CPU backend or a larger "
        "GPU (`flashdesk-cli inspect --plan` shows the sizes)");
  ExpertPlacement p;
  if (plan.expert_layers_on_gpu < layers) {
    p.host_experts_from = plan.expert_layers_on_gpu;
    p.summary = "routed experts of layers " + std::to_string(p.host_experts_from) + "-" +
                std::to_string(layers - 1) +
                " stay in host memory and the CPU computes them (the GPU holds " +
                gib(gpu_free - gpu_reserve) + " for weights)";
  }
  return p;
}

}  // namespace flashdesk
