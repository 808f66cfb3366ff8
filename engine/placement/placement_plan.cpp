// The placement planner (placement_plan.h): tensor families from the expected tensor list, then
// the rule of the header applied tier by tier.
#include "engine/placement/placement_plan.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "engine/checkpoint/tensor_spec.h"
#include "engine/model/sharding.h"

namespace flashdesk {
namespace {

enum class Family : uint8_t { Shared, Dense, Experts, EngramTable, Vision, DSpark };

struct Classified {
  Family family;
  int64_t layer = -1;
};

Classified classify(std::string_view name) {
  constexpr std::string_view kLayers = "layers.";
  if (name.starts_with("mtp.")) return {Family::DSpark};
  if (name == "embed.weight" || name == "head.weight" || name == "norm.weight")
    return {Family::Shared};
  if (!name.starts_with(kLayers)) return {Family::Vision};  // vision.*, aligner.*, image_*
  std::string_view rest = name.substr(kLayers.size());
  int64_t layer = 0;
  size_t i = 0;
  for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9'; ++i)
    layer = layer * 10 + (rest[i] - '0');
  rest = rest.substr(std::min(rest.size(), i + 1));
  if (rest.starts_with("ffn.experts.")) return {Family::Experts, layer};
  if (rest.starts_with("engram.embed.")) return {Family::EngramTable, layer};
  return {Family::Dense, layer};
}

// Bytes one rank holds of a tensor split over `world` GPUs (sharding.h): split tensors by 1 /
// world (rounded up), the shared expert on the first rank only, the rest replicated.
uint64_t bytes_on_rank(const TensorSpec& t, int rank, int world) {
  switch (shard_split(t.name)) {
    case ShardSplit::Replicated:
      return t.nbytes();
    case ShardSplit::FirstRankOnly:
      return rank == 0 ? t.nbytes() : 0;
    default:
      return (t.nbytes() + static_cast<uint64_t>(world) - 1) / static_cast<uint64_t>(world);
  }
}

// What a model's tensors add up to, per family and layer.
struct Inventory {
  uint64_t shared = 0, vision = 0, dspark = 0, total = 0;
  double shared_read = 0;  // embedding row + the whole head and final norm
  std::vector<uint64_t> dense, experts, engram;
  std::vector<uint64_t> dense_rank0;  // the busiest rank's share of each layer's dense part
  std::vector<double> engram_read;    // bytes of the table rows one token gathers
};

Inventory take_inventory(const ModelConfig& c, int world) {
  const TextConfig& t = c.text;
  const auto L = static_cast<size_t>(t.num_hidden_layers);
  Inventory inv;
  inv.dense.assign(L, 0);
  inv.dense_rank0.assign(L, 0);
  inv.experts.assign(L, 0);
  inv.engram.assign(L, 0);
  inv.engram_read.assign(L, 0.0);
  const int ranks = std::max(world, 1);
  for (const TensorSpec& s : expected_tensors(c)) {
    const Classified k = classify(s.name);
    const uint64_t b = s.nbytes();
    inv.total += b;
    const auto l = static_cast<size_t>(std::max<int64_t>(k.layer, 0));
    switch (k.family) {
      case Family::Shared:
        inv.shared += b;
        inv.shared_read += s.name == "embed.weight" && !s.shape.empty()
                               ? static_cast<double>(b) / static_cast<double>(s.shape[0])
                               : static_cast<double>(b);
        break;
      case Family::Vision:
        inv.vision += b;
        break;
      case Family::DSpark:
        inv.dspark += b;
        break;
      case Family::Dense:
        inv.dense[l] += b;
        inv.dense_rank0[l] += bytes_on_rank(s, 0, ranks);
        break;
      case Family::Experts:
        inv.experts[l] += b;
        break;
      case Family::EngramTable: {
        inv.engram[l] += b;
        // A token gathers one row per head and n-gram order (2..max) of each table.
        const double rows_read =
            static_cast<double>(std::max<int64_t>(t.engram_n_heads, 1) *
                                std::max<int64_t>(t.engram_max_ngram_size - 1, 1));
        if (!s.shape.empty() && s.shape[0] > 0)
          inv.engram_read[l] += std::min(rows_read, static_cast<double>(s.shape[0])) *
                                static_cast<double>(b) / static_cast<double>(s.shape[0]);
        break;
      }
    }
  }
  return inv;
}

std::string layer_range(int64_t first, int64_t last) {  // inclusive
  return first == last ? "layer " + std::to_string(first)
                       : "layers " + std::to_string(first) + "-" + std::to_string(last);
}

uint64_t sum(const std::vector<uint64_t>& v, int64_t first, int64_t end) {
  uint64_t s = 0;
  for (int64_t i = first; i < end; ++i) s += v[static_cast<size_t>(i)];
  return s;
}

// Host memory first, the SSD for the rest: how much of `bytes` lands where.
struct Spill {
  uint64_t host = 0, ssd = 0;
};
Spill take_host(uint64_t bytes, uint64_t& host_left) {
  Spill s;
  s.host = std::min(bytes, host_left);
  s.ssd = bytes - s.host;
  host_left -= s.host;
  return s;
}

}  // namespace

const char* tier_name(Tier t) {
  switch (t) {
    case Tier::Gpu:
      return "GPU";
    case Tier::Host:
      return "host RAM";
    case Tier::Ssd:
      return "SSD (mapped)";
  }
  return "?";
}

PlacementPlan plan_placement(const ModelConfig& config, const MachineSpec& m) {
  const TextConfig& t = config.text;
  PlacementPlan plan;
  plan.gpus = static_cast<int>(m.gpu_bytes.size());
  plan.layers = t.num_hidden_layers;
  const int world = plan.gpus;
  const Inventory inv = take_inventory(config, world);
  plan.model_bytes = inv.total;
  // The smallest GPU's room after its reserve bounds every rank (ranks hold equal shares).
  uint64_t room = 0;
  if (world > 0) {
    const uint64_t smallest = *std::min_element(m.gpu_bytes.begin(), m.gpu_bytes.end());
    room = smallest > m.gpu_reserve ? smallest - m.gpu_reserve : 0;
  }
  uint64_t host_left = m.host_bytes;
  const double experts_read_share =
      t.n_routed_experts > 0
          ? static_cast<double>(t.num_experts_per_tok) / static_cast<double>(t.n_routed_experts)
          : 0.0;
  auto add = [&](PlacedPart p) {
    if (p.bytes > 0) plan.parts.push_back(std::move(p));
  };
  auto on_host = [&](const std::string& what, const std::string& how, uint64_t bytes, double read) {
    const Spill s = take_host(bytes, host_left);
    const double host_share = bytes ? static_cast<double>(s.host) / static_cast<double>(bytes) : 0;
    add({what, Tier::Host, how, s.host, 0, read * host_share});
    add({what, Tier::Ssd, "page cache over the checkpoint", s.ssd, 0, read * (1 - host_share)});
  };

  // 1. Embedding, head and final norm, then the dense layers in order, on the GPUs: rank 0 is
  // the busiest (it also holds the shared experts), so its share decides.
  int64_t dense_on_gpu = 0;
  uint64_t rank0 = 0;
  if (world > 0 && inv.shared <= room) {
    rank0 = inv.shared;
    while (dense_on_gpu < plan.layers &&
           rank0 + inv.dense_rank0[static_cast<size_t>(dense_on_gpu)] <= room)
      rank0 += inv.dense_rank0[static_cast<size_t>(dense_on_gpu++)];
  }
  plan.dense_layers_on_gpu = dense_on_gpu;
  const std::string split_how =
      world > 1 ? "attention split by heads over " + std::to_string(world) + " GPUs" : "one GPU";
  if (world > 0 && inv.shared <= room) {
    add({"embedding, head, final norm", Tier::Gpu, world > 1 ? "replicated" : "one GPU", inv.shared,
         inv.shared, inv.shared_read});
  } else {
    on_host("embedding, head, final norm", "CPU computes", inv.shared, inv.shared_read);
  }
  if (dense_on_gpu > 0) {
    const uint64_t bytes = sum(inv.dense, 0, dense_on_gpu);
    add({"attention and dense parts, " + layer_range(0, dense_on_gpu - 1), Tier::Gpu, split_how,
         bytes, sum(inv.dense_rank0, 0, dense_on_gpu), static_cast<double>(bytes)});
  }
  if (dense_on_gpu < plan.layers) {
    const uint64_t bytes = sum(inv.dense, dense_on_gpu, plan.layers);
    on_host("attention and dense parts, " + layer_range(dense_on_gpu, plan.layers - 1),
            "CPU computes these layers", bytes, static_cast<double>(bytes));
    if (world > 0)
      plan.notes.push_back("layers " + std::to_string(dense_on_gpu) + "-" +
                           std::to_string(plan.layers - 1) +
                           " run on the CPU: the GPUs cannot hold every layer's attention");
  }
  // 2. Vision and DSpark on the first GPU when they fit (used only for images / drafting).
  for (const auto& [what, bytes] : {std::pair<std::string, uint64_t>{"vision tower", inv.vision},
                                    {"DSpark stages", inv.dspark}}) {
    if (bytes == 0) continue;
    if (world > 0 && rank0 + bytes <= room) {
      rank0 += bytes;
      add({what, Tier::Gpu, "first GPU", bytes, bytes, 0});
    } else {
      on_host(what, "CPU computes", bytes, 0);
    }
  }
  // 3. Routed experts, a layer at a time, spread evenly over the GPUs (every rank then holds
  // 1 / world of the layer's experts; rank 0's room is what is left after the rest above).
  int64_t experts_on_gpu = 0;
  if (world > 0) {
    uint64_t per_rank = rank0;
    while (experts_on_gpu < dense_on_gpu) {
      const uint64_t share =
          (inv.experts[static_cast<size_t>(experts_on_gpu)] + static_cast<uint64_t>(world) - 1) /
          static_cast<uint64_t>(world);
      if (per_rank + share > room) break;
      per_rank += share;
      ++experts_on_gpu;
    }
  }
  plan.expert_layers_on_gpu = experts_on_gpu;
  if (experts_on_gpu > 0) {
    const uint64_t bytes = sum(inv.experts, 0, experts_on_gpu);
    add({"routed experts, " + layer_range(0, experts_on_gpu - 1), Tier::Gpu,
         world > 1 ? "expert parallel over " + std::to_string(world) + " GPUs" : "one GPU", bytes,
         (bytes + static_cast<uint64_t>(world) - 1) / static_cast<uint64_t>(world),
         static_cast<double>(bytes) * experts_read_share});
  }
  if (experts_on_gpu < plan.layers) {
    const uint64_t bytes = sum(inv.experts, experts_on_gpu, plan.layers);
    on_host("routed experts, " + layer_range(experts_on_gpu, plan.layers - 1), "CPU computes",
            bytes, static_cast<double>(bytes) * experts_read_share);
  }
  // 4. Engram tables: pinned host memory (a token reads a few rows), the SSD for the rest.
  uint64_t engram_bytes = 0;
  double engram_read = 0;
  for (size_t l = 0; l < inv.engram.size(); ++l) {
    engram_bytes += inv.engram[l];
    engram_read += inv.engram_read[l];
  }
  on_host("Engram tables", "pinned, rows gathered per token", engram_bytes, engram_read);

  // Totals and the roofline time of one decoded token.
  for (const PlacedPart& p : plan.parts) {
    if (p.tier == Tier::Gpu) {
      plan.gpu_read_per_rank += world > 0 ? p.read_per_token / world : 0;
    } else if (p.tier == Tier::Host) {
      plan.host_used += p.bytes;
      plan.host_read += p.read_per_token;
    } else {
      plan.ssd_bytes += p.bytes;
      plan.ssd_read += p.read_per_token;
    }
  }
  for (const PlacedPart& p : plan.parts)
    if (p.tier == Tier::Gpu) plan.gpu_busiest += p.bytes_per_gpu;
  plan.decode_seconds = plan.gpu_read_per_rank / m.gpu_bandwidth +
                        plan.host_read / m.host_bandwidth + plan.ssd_read / m.ssd_bandwidth;
  if (plan.ssd_bytes > 0)
    plan.notes.push_back("host memory is short: part of the model is read from the SSD");
  if (world == 0) plan.notes.push_back("no GPU: the CPU computes everything");
  return plan;
}

std::string describe_plan(const ModelConfig& config, const MachineSpec& m,
                          const PlacementPlan& plan) {
  auto gib = [](double b) { return b / static_cast<double>(1ull << 30); };
  std::string out;
  char line[512];
  std::string gpus_text;
  if (plan.gpus > 0) {
    std::snprintf(
        line, sizeof line, " of %.0f GiB",
        gib(static_cast<double>(*std::min_element(m.gpu_bytes.begin(), m.gpu_bytes.end()))));
    gpus_text = line;
  }
  std::snprintf(line, sizeof line,
                "placement of %s (%.1f GiB) on %d GPU(s)%s + %.0f GiB host memory "
                "(reserve %.0f GiB per GPU for KV and scratch)\n\n",
                config.name.c_str(), gib(static_cast<double>(plan.model_bytes)), plan.gpus,
                gpus_text.c_str(), gib(static_cast<double>(m.host_bytes)),
                gib(static_cast<double>(m.gpu_reserve)));
  out += line;
  out += "| part | where | how | GiB | GiB on the busiest GPU | MB read per token |\n";
  out += "| --- | --- | --- | ---: | ---: | ---: |\n";
  for (const PlacedPart& p : plan.parts) {
    char per_gpu[32] = "-";
    if (p.tier == Tier::Gpu)
      std::snprintf(per_gpu, sizeof per_gpu, "%.2f", gib(static_cast<double>(p.bytes_per_gpu)));
    std::snprintf(line, sizeof line, "| %s | %s | %s | %.2f | %s | %.2f |\n", p.what.c_str(),
                  tier_name(p.tier), p.how.c_str(), gib(static_cast<double>(p.bytes)), per_gpu,
                  p.read_per_token / 1e6);
    out += line;
  }
  const double gpu_max = static_cast<double>(plan.gpu_busiest);
  std::snprintf(line, sizeof line,
                "\nGPU: %.1f GiB on the busiest of %d; host RAM: %.1f GiB; SSD: %.1f GiB\n",
                gib(gpu_max), plan.gpus, gib(static_cast<double>(plan.host_used)),
                gib(static_cast<double>(plan.ssd_bytes)));
  out += line;
  const double ms = plan.decode_seconds * 1e3;
  std::snprintf(line, sizeof line,
                "decode roofline at batch 1: GPU %.2f GB per rank at %.0f GB/s + host %.2f GB at "
                "%.0f GB/s + SSD %.3f GB at %.1f GB/s = %.2f ms/token (%.1f tokens/s)\n",
                plan.gpu_read_per_rank / 1e9, m.gpu_bandwidth / 1e9, plan.host_read / 1e9,
                m.host_bandwidth / 1e9, plan.ssd_read / 1e9, m.ssd_bandwidth / 1e9, ms,
                ms > 0 ? 1e3 / ms : 0.0);
  out += line;
  for (const std::string& n : plan.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace flashdesk
