// `flashdesk-cli inspect DIR|config.json`: the config in brief, the layer-role table, parameter
// counts, bytes by dtype and the KV bytes per token; with weights present it also validates the
// checkpoint and prints its fingerprint and how the weights were digested for it (with
// --synthetic-weights: the synthetic checkpoint's fingerprint; nothing is generated). With --plan:
// where each part of the model would live on a machine (engine/placement/placement_plan.h), this
// one (--devices auto) or one described by the options.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include <cxxopts.hpp>

#include "app/cli/cli_numbers.h"
#include "app/cli/synthetic_options.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/model_stats.h"
#include "engine/placement/machine_detect.h"
#include "engine/placement/placement_plan.h"
#include "engine/util/error.h"
#include "engine/util/sha256.h"

namespace flashdesk::cli {
namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) {
    if (!s.empty()) s.append(", ");
    s.append(std::to_string(x));
  }
  return s.empty() ? "none" : s;
}

std::string source(int64_t layer) {
  return layer < 0 ? "-" : std::to_string(layer);
}

// "551,618,232,320 (551.62 B)"
std::string count(int64_t n) {
  std::string digits = std::to_string(n), grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped.push_back(',');
    grouped.push_back(digits[i]);
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%.2f B)", static_cast<double>(n) / 1e9);
  return grouped + buf;
}

std::string gib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

void print_summary(const ModelConfig& c) {
  const TextConfig& t = c.text;
  std::printf("model: %s (%s)\n", c.name.c_str(), c.model_type.c_str());
  std::printf("layers: %lld main + %lld DSpark stages; hidden %lld; vocab %lld\n",
              (long long)t.num_hidden_layers, (long long)dspark_stages(t), (long long)t.hidden_size,
              (long long)t.vocab_size);
  std::printf(
      "attention: %lld heads x %lld (rope %lld), q_lora %lld, output %lld groups x %lld, "
      "window %lld\n",
      (long long)t.num_attention_heads, (long long)t.head_dim, (long long)t.qk_rope_head_dim,
      (long long)t.q_lora_rank, (long long)t.o_groups, (long long)t.o_lora_rank,
      (long long)t.sliding_window);
  std::printf("indexer: %lld heads x %lld, top-k %lld; candidates: %s\n",
              (long long)t.index_n_heads, (long long)t.index_head_dim, (long long)t.index_topk,
              t.candidate_source_layer_id
                  ? ("layer " + std::to_string(*t.candidate_source_layer_id) + ", " +
                     std::to_string(t.candidate_topk_blocks) + " blocks of " +
                     std::to_string(t.candidate_block_size))
                        .c_str()
                  : "none");
  std::printf("MoE: %lld routed experts (top %lld) + %lld shared, inter %lld; mHC %lld streams\n",
              (long long)t.n_routed_experts, (long long)t.num_experts_per_tok,
              (long long)t.n_shared_experts, (long long)t.moe_intermediate_size,
              (long long)t.hc_mult);
  std::printf("Engram: layers %s; n-grams 2..%lld x %lld heads x %lld; table rows %s\n",
              list(t.engram_layer_ids).c_str(), (long long)t.engram_max_ngram_size,
              (long long)t.engram_n_heads, (long long)t.engram_head_dim,
              list(t.engram_num_embeddings).c_str());
  if (c.vision)
    std::printf("vision: %lld blocks x %lld, %lld heads, patch %lld, downsample %lld\n",
                (long long)c.vision->num_hidden_layers, (long long)c.vision->hidden_size,
                (long long)c.vision->num_attention_heads, (long long)c.vision->patch_size,
                (long long)c.vision->downsample_ratio);
  else
    std::printf("vision: none\n");
  const int64_t first = decoder_first_layer(t);
  if (first < t.num_hidden_layers)
    std::printf("CED: encoder layers 0-%lld, decoder layers %lld-%lld\n", (long long)first - 1,
                (long long)first, (long long)t.num_hidden_layers - 1);
  else
    std::printf("CED: no decoder (every layer runs on every prompt token)\n");
}

void print_roles(const std::vector<LayerRole>& roles) {
  std::printf("\n%-5s %-5s %-11s %-6s %-7s %-9s %-7s %s\n", "layer", "ratio", "role", "kv_src",
              "idx_src", "cand_src", "engram", "part");
  for (const LayerRole& r : roles) {
    std::string role(attn_role_name(r.role));
    if (r.builds_candidates) role += "+cand";
    std::printf("%-5lld %-5lld %-11s %-6s %-7s %-9s %-7s %s\n", (long long)r.layer,
                (long long)r.compress_ratio, role.c_str(), source(r.kv_source).c_str(),
                source(r.index_source).c_str(), source(r.candidate_source).c_str(),
                r.engram ? "yes" : "-", r.decoder ? "decoder" : "encoder");
  }
}

void print_sizes(const ModelConfig& c) {
  const ParameterCounts p = count_parameters(c);
  std::printf("\nparameters:\n");
  std::printf("  total                      %s\n", count(p.total).c_str());
  std::printf("  backbone (no Engram)       %s\n", count(p.backbone).c_str());
  std::printf("  Engram                     %s (tables %s)\n", count(p.engram).c_str(),
              count(p.engram_tables).c_str());
  std::printf("  vision                     %s\n", count(p.vision).c_str());
  std::printf("  DSpark                     %s\n", count(p.dspark).c_str());
  std::printf("  active per prefill token   %s (bounded mode)\n", count(p.active_prefill).c_str());
  std::printf("  active per decode token    %s\n", count(p.active_decode).c_str());
  std::printf("\nbytes by dtype:\n");
  uint64_t total = 0;
  for (const DTypeTotal& d : bytes_by_dtype(expected_tensors(c))) {
    std::printf("  %-8s %8lld tensors %18llu bytes (%s)\n",
                std::string(dtype_name(d.dtype)).c_str(), (long long)d.tensors,
                (unsigned long long)d.bytes, gib(d.bytes).c_str());
    total += d.bytes;
  }
  std::printf("  %-8s %8s         %18llu bytes (%s)\n", "total", "", (unsigned long long)total,
              gib(total).c_str());
  const KvBytesPerToken kv = kv_bytes_per_token(c);
  std::printf(
      "\npersisted global KV: %g B/token (main KV %g + index keys %g; encoder %g, decoder %g)\n",
      kv.total(), kv.main, kv.index, kv.encoder, kv.decoder);
  std::printf("window KV (not persisted): %llu B per sequence (%lld layers x %lld x %lld B)\n",
              (unsigned long long)kv.window_bytes_per_sequence, (long long)c.text.num_hidden_layers,
              (long long)c.text.sliding_window, (long long)kv.window_bytes_per_entry);
}

// How the weights' content digests (part of the fingerprint) were obtained.
void print_digest_report(const WeightDigestReport& r) {
  if (!r.synthesised.empty()) {
    std::printf("weights: synthetic (%s), generated when first read; nothing digested\n",
                r.synthesised.c_str());
    return;
  }
  const double gb = static_cast<double>(r.bytes_read) / 1e9;
  std::printf("weights digest: %zu files, %zu from the cache; %.3f GB read and hashed in %.2f s",
              r.files, r.from_cache, gb, r.seconds);
  if (r.bytes_read > 0 && r.seconds > 0)
    std::printf(" (%.2f GB/s, %d threads, SHA-256 %s)", gb / r.seconds, r.threads,
                Sha256::hardware_accelerated() ? "on the SHA extensions" : "portable");
  std::printf("\n");
  if (!r.cache_note.empty()) std::printf("note: %s\n", r.cache_note.c_str());
}

uint64_t gib_bytes(double gib_value, const char* what) {
  if (!(gib_value >= 0) || gib_value > 1e6)
    throw InvalidRequest(std::string(what) + ": expected GiB between 0 and 1e6, got " +
                         std::to_string(gib_value));
  return static_cast<uint64_t>(gib_value * static_cast<double>(1ull << 30));
}

double gb_per_s(double value, const char* what) {
  if (!(value > 0) || value > 1e6)
    throw InvalidRequest(std::string(what) + ": expected GB/s above 0, got " +
                         std::to_string(value));
  return value * 1e9;
}

// The machine --plan describes: this one's GPUs (free memory) with --devices auto, else N GPUs
// of --gpu-mem GiB each.
MachineSpec machine_of(const cxxopts::ParseResult& args) {
  MachineSpec m;
  const std::string devices = args["devices"].as<std::string>();
  if (devices == "auto") {
    m.gpu_bytes = detect_machine().gpu_bytes;
  } else {
    const std::optional<int64_t> n = parse_nonnegative_integer(devices);
    if (!n || *n > 64)
      throw InvalidRequest("--devices: expected auto or a GPU count 0-64, got '" + devices + "'");
    m.gpu_bytes.assign(static_cast<size_t>(*n),
                       gib_bytes(args["gpu-mem"].as<double>(), "--gpu-mem"));
  }
  const std::string host = args["host-mem"].as<std::string>();
  if (host == "auto") {
    m.host_bytes = available_host_bytes();
  } else {
    double value = -1;
    try {
      size_t used = 0;
      value = std::stod(host, &used);
      if (used != host.size()) value = -1;
    } catch (const std::exception&) {
      value = -1;
    }
    m.host_bytes = gib_bytes(value, "--host-mem");
  }
  m.gpu_reserve = gib_bytes(args["gpu-reserve"].as<double>(), "--gpu-reserve");
  m.gpu_bandwidth = gb_per_s(args["gpu-bw"].as<double>(), "--gpu-bw");
  m.host_bandwidth = gb_per_s(args["host-bw"].as<double>(), "--host-bw");
  m.ssd_bandwidth = gb_per_s(args["ssd-bw"].as<double>(), "--ssd-bw");
  return m;
}

}  // namespace

int run_inspect(int argc, char** argv) {
  cxxopts::Options opts("flashdesk-cli inspect",
                        "Summarise a model directory (validating its weights) or a config.json");
  opts.add_options()("path", "model directory or config.json", cxxopts::value<std::string>())(
      "allow-partial", "accept a partial checkpoint (make-random --layers)")(
      "plan", "print where each part of the model would live (GPUs, host RAM, SSD)")(
      "devices", "with --plan: auto (this machine's GPUs) or a GPU count",
      cxxopts::value<std::string>()->default_value("auto"))(
      "gpu-mem", "with --plan and a GPU count: GiB per GPU",
      cxxopts::value<double>()->default_value("141"))(
      "host-mem", "with --plan: GiB of host memory the model may use, or auto (MemAvailable)",
      cxxopts::value<std::string>()->default_value("auto"))(
      "gpu-reserve", "with --plan: GiB kept per GPU for KV caches and scratch",
      cxxopts::value<double>()->default_value("8"))(
      "gpu-bw", "with --plan: GB/s of one GPU's memory",
      cxxopts::value<double>()->default_value("4800"))(
      "host-bw", "with --plan: GB/s of host memory",
      cxxopts::value<double>()->default_value("100"))("ssd-bw", "with --plan: GB/s of the SSD",
                                                      cxxopts::value<double>()->default_value("7"))(
      "h,help", "show this help");
  add_synthetic_options(opts, true);
  opts.parse_positional({"path"});
  const auto args = opts.parse(argc, argv);
  if (args.count("help") || !args.count("path")) {
    std::printf("%s\n", opts.help().c_str());
    return args.count("help") ? 0 : 2;
  }
  const std::filesystem::path path = args["path"].as<std::string>();
  const std::optional<SyntheticWeights> synthetic = synthetic_options(args);
  std::unique_ptr<Checkpoint> ckpt;
  ModelConfig config;
  const bool is_dir = std::filesystem::is_directory(path);
  if (args.count("plan")) {  // the config is enough: no need to read (and digest) the weights
    const ModelConfig planned = load_model_config((is_dir ? path / "config.json" : path).string());
    const MachineSpec machine = machine_of(args);
    std::printf("%s", describe_plan(planned, machine, plan_placement(planned, machine)).c_str());
    return 0;
  }
  const bool has_weights =
      is_dir && (std::filesystem::exists(path / "model.safetensors") ||
                 std::filesystem::exists(path / "model.safetensors.index.json"));
  if (synthetic) {
    ckpt = open_synthetic_checkpoint(path, *synthetic);
    config = ckpt->config();
  } else if (has_weights) {
    CheckpointOptions options;
    options.allow_partial = args.count("allow-partial") > 0;
    ckpt = Checkpoint::open(path, options);
    config = ckpt->config();
  } else {
    config = load_model_config((is_dir ? path / "config.json" : path).string());
  }
  print_summary(config);
  print_roles(derive_layer_roles(config.text));
  print_sizes(config);
  if (ckpt) {
    if (synthetic)
      std::printf("\ncheckpoint: %zu tensors, synthetic; fingerprint %s\n",
                  ckpt->tensor_names().size(), ckpt->fingerprint().c_str());
    else
      std::printf("\ncheckpoint: %zu tensors in %zu files, valid; fingerprint %s\n",
                  ckpt->tensor_names().size(), ckpt->files().size(), ckpt->fingerprint().c_str());
    if (!ckpt->partial_layers().empty())
      std::printf("partial: holds layers %s only\n", list(ckpt->partial_layers()).c_str());
    print_digest_report(ckpt->weight_digest_report());
  } else {
    std::printf("\ncheckpoint: no weights (config only)\n");
  }
  return 0;
}

}  // namespace flashdesk::cli
