// Where each part of a model lives on a machine: the GPUs of one host, pinned host memory, or the
// checkpoint memory-mapped from the SSD (issue 18's placement planner; docs/placement.md).
//
// Goals: decide from the config alone (no weights needed: a 475 GiB model can be planned on a
// laptop), by a rule a user can follow, and say what the choice costs per generated token. The
// rule, in order: the embedding, head, vision tower and DSpark stages and every layer's dense part
// (attention, shared expert, gate, norms, mHC, Engram projections) on the GPUs, split by the
// sharding rules (engine/model/sharding.h: attention by heads, wo_b by groups); if they do not
// fit, whole trailing layers run on the CPU instead. Then routed experts, a layer at a time in
// layer order, spread evenly over the GPUs (expert parallel) while every rank has room after its
// reserve (KV and scratch); the other layers' experts stay in host memory and the CPU computes
// them (hybrid). Engram tables in pinned host memory (a token reads a few rows of them). What
// host memory cannot hold is read from the SSD through the page cache: Engram tables first, then
// experts. The expected decode time sums each tier's bytes per token over its bandwidth (the
// layers run one after another), so the numbers are a roofline, not a measurement.
//
// Non-goals: tensor-parallel experts and per-expert placement (the whole layer's experts move
// together), prefill costs, and the KV of long contexts beyond the reserve the caller gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint/config.h"

namespace flashdesk {

// What the planner may use. Bandwidths are per device (GPU HBM) or for the whole host (DRAM, SSD)
// in bytes per second: the defaults are an H200, a dual-channel-per-socket server and an NVMe SSD.
struct MachineSpec {
  std::vector<uint64_t> gpu_bytes;    // free memory of each GPU; empty = no GPU
  uint64_t host_bytes = 0;            // host memory the model may pin
  uint64_t gpu_reserve = 8ull << 30;  // per GPU, kept for the KV caches and scratch
  double gpu_bandwidth = 4.8e12;
  double host_bandwidth = 1.0e11;
  double ssd_bandwidth = 7.0e9;
};

enum class Tier : uint8_t { Gpu, Host, Ssd };
const char* tier_name(Tier t);

// One row of the plan: a family of tensors over a range of layers, in one tier.
struct PlacedPart {
  std::string what;  // e.g. "routed experts, layers 0-15"
  Tier tier = Tier::Gpu;
  std::string how;             // e.g. "split by heads over 2 GPUs", "CPU computes"
  uint64_t bytes = 0;          // the model's bytes of this part (one copy)
  uint64_t bytes_per_gpu = 0;  // what the busiest GPU holds of it (GPU rows)
  double read_per_token = 0;   // bytes read by one decoded token (batch 1), all ranks
};

struct PlacementPlan {
  int gpus = 0;
  int64_t layers = 0;
  int64_t dense_layers_on_gpu = 0;   // layers [0, this) run on the GPUs, the rest on the CPU
  int64_t expert_layers_on_gpu = 0;  // of those, how many keep their routed experts on the GPUs
  std::vector<PlacedPart> parts;
  uint64_t gpu_busiest = 0;  // bytes on the busiest GPU (the first), reserve excluded
  uint64_t host_used = 0, ssd_bytes = 0, model_bytes = 0;
  // Bytes one decoded token reads in each tier (GPU: the busiest rank's share) and the roofline
  // time from the machine's bandwidths, summed over the tiers.
  double gpu_read_per_rank = 0, host_read = 0, ssd_read = 0;
  double decode_seconds = 0;
  std::vector<std::string> notes;  // what the user should know (a tier too small, ...)
};

PlacementPlan plan_placement(const ModelConfig& config, const MachineSpec& machine);

// The plan as the CLI prints it (a table and the totals).
std::string describe_plan(const ModelConfig& config, const MachineSpec& machine,
                          const PlacementPlan& plan);

}  // namespace flashdesk
