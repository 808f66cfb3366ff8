// The whole model split over ranks (RankGroup: one GPU a rank joined by NCCL, or CPU backends in
// threads), as issue 23 measures V4.1-Flash on four GPUs from `--synthetic-weights`: the load;
// the time to the first token of long prompts, exact and bounded prefill; decode steps over
// batches of sequences (ms a step, tokens/s) against the roofline of the weight bytes a token
// reads spread over the ranks, each at the memory bandwidth measured in the same run; and the
// global KV one sequence holds at a context, 1M tokens by default.
//
//   model_ranks_bench [--model DIR | --model CONFIG --synthetic-weights SEED] [--backend cuda|cpu]
//                     [--ranks N] [--prompts 8192,65536] [--modes exact,bounded]
//                     [--chunk N] [--batches 1,8,32] [--context N] [--decode N]
//                     [--kv-context N]
//   With cuda, FLASHDESK_CUDA_DRAW_WEIGHTS=1 draws synthetic weights on the GPUs (random_draw.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_timing.h"
#include "bench/model_speed.h"
#include "engine/checkpoint/model_stats.h"
#include "engine/checkpoint/synthetic_checkpoint.h"
#include "engine/ops/cuda/cuda_devices.h"
#include "engine/runtime/backend_factory.h"
#include "engine/runtime/rank_group.h"
#ifdef FLASHDESK_HAVE_CUDA
#include "engine/ops/cuda/bench_support.h"
#endif

namespace {

namespace fd = flashdesk;
using fd::bench::Clock;
using fd::bench::median;
using fd::bench::random_prompt;
using fd::bench::seconds_since;

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The memory bandwidth (read + write) a rank's weights are read at: a device copy on GPU 0 (the
// ranks' GPUs are alike), or memcpy on every core shared by the CPU ranks.
double rank_bandwidth(bool gpus, int ranks) {
#ifdef FLASHDESK_HAVE_CUDA
  if (gpus) {
    fd::CudaBackend be(0);
    return fd::cuda_bench::copy_bandwidth(be, size_t{1} << 30);
  }
#endif
  (void)gpus;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return fd::bench::memcpy_bandwidth(hw) / ranks;
}

struct DecodeRow {
  int64_t batch = 0;
  double step_ms = 0;
};

// Decode steps over `batch` sequences of `context` prompt tokens each: the median step.
DecodeRow decode_steps(fd::RankGroup& group, int64_t batch, int64_t context, int64_t steps) {
  const int64_t V = group.config().text.vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < batch; ++i)
    prompts.push_back(random_prompt(context, V, static_cast<uint32_t>(100 + i)));
  std::vector<std::vector<float>> logits = group.prefill_batch(prompts, fd::PrefillOptions{});
  std::vector<double> times;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int32_t> ids;
    for (const auto& l : logits) ids.push_back(argmax(l));
    const auto t0 = Clock::now();
    logits = group.decode_batch(ids);
    times.push_back(seconds_since(t0));
  }
  return {batch, 1e3 * median(times)};
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("model_ranks_bench", "The whole model over ranks: load, TTFT, decode");
  options.add_options()(
      "model", "model directory, or with --synthetic-weights a config.json or its directory",
      cxxopts::value<std::string>()->default_value(
          (std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/deepseek-v4.1-flash.json")
              .string()))("synthetic-weights", "the weights generated with this seed",
                          cxxopts::value<uint64_t>())(
      "backend", "cuda (rank r on GPU r, NCCL) or a CPU backend (cpu, cpu-reference)",
      cxxopts::value<std::string>()->default_value("cuda"))(
      "ranks", "ranks (GPUs)", cxxopts::value<int>()->default_value("4"))(
      "prompts", "prompt lengths of the time-to-first-token table",
      cxxopts::value<std::vector<int64_t>>()->default_value("8192,65536"))(
      "modes", "prefill modes of that table (exact, bounded)",
      cxxopts::value<std::vector<std::string>>()->default_value("exact,bounded"))(
      "batches", "decode batch sizes",
      cxxopts::value<std::vector<int64_t>>()->default_value("1,8,32"))(
      "chunk",
      "prefill step size in tokens (0: a prompt in one step, whose index scores are "
      "[tokens, entries] F32: 17 GB a ratio-1 layer at 64K)",
      cxxopts::value<int64_t>()->default_value("8192"))(
      "context", "prompt tokens of each decoded sequence",
      cxxopts::value<int64_t>()->default_value("1024"))(
      "decode", "timed decode steps (median)", cxxopts::value<int64_t>()->default_value("16"))(
      "kv-context", "context of the KV footprint line",
      cxxopts::value<int64_t>()->default_value("1048576"));
  const auto args = fd::bench::parse_options(options, argc, argv);
  const std::string backend = args["backend"].as<std::string>();
  const bool gpus = backend == "cuda";
  const int ranks = args["ranks"].as<int>();
  if (gpus && static_cast<int>(fd::cuda_devices().size()) < ranks) {
    std::printf("model_ranks_bench: %d ranks need %d GPUs, %zu found (%s); nothing measured\n",
                ranks, ranks, fd::cuda_devices().size(),
                fd::cuda_devices().empty() ? fd::cuda_unavailable_reason().c_str() : "");
    return 0;
  }
  std::optional<fd::SyntheticWeights> synthetic;
  if (args.count("synthetic-weights")) {
    synthetic.emplace();
    synthetic->seed = args["synthetic-weights"].as<uint64_t>();
  }
  std::shared_ptr<const fd::Checkpoint> ckpt =
      fd::open_checkpoint(args["model"].as<std::string>(), synthetic);
  const fd::ModelConfig& config = ckpt->config();
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double bytes_per_token = fd::bench::weight_bytes_per_token(*ckpt);
  const double bandwidth = rank_bandwidth(gpus, ranks);

  auto t0 = Clock::now();
  fd::RankGroup group(
      ckpt, ranks,
      [&](int r) {
        return fd::make_backend(gpus ? "cuda:" + std::to_string(r) : backend,
                                gpus ? 0 : std::max(1, hw / ranks));
      },
      {},
      gpus ? fd::RankGroup::CollectiveMaker(fd::make_nccl_collectives)
           : fd::RankGroup::CollectiveMaker());
  const double load_s = seconds_since(t0);

  std::printf(
      "model_ranks_bench: %s, %d ranks on %s, weights %s\n", config.name.c_str(), ranks,
      gpus ? fd::cuda_devices().front().name.c_str() : backend.c_str(),
      synthetic ? ("synthetic (seed " + std::to_string(synthetic->seed) + ")").c_str() : "read");
  std::printf(
      "load: %.1f s; weight bytes a decoded token reads: %.2f GB; a rank's memory bandwidth "
      "(read + write): %.0f GB/s; decode floor at batch 1: %.3f ms/token\n\n",
      load_s, bytes_per_token / 1e9, bandwidth / 1e9, 1e3 * bytes_per_token / ranks / bandwidth);

  const int64_t chunk = args["chunk"].as<int64_t>();
  std::printf("prefill in steps of %lld tokens\n\n", static_cast<long long>(chunk));
  std::printf("| prompt tokens | prefill | time to first token s | prompt tokens/s |\n");
  std::printf("| ---: | --- | ---: | ---: |\n");
  for (const int64_t n : args["prompts"].as<std::vector<int64_t>>())
    for (const std::string& mode : args["modes"].as<std::vector<std::string>>()) {
      const fd::PrefillOptions opt{
          mode == "bounded" ? fd::PrefillMode::Bounded : fd::PrefillMode::Exact, chunk, false};
      const auto prompt = random_prompt(n, config.text.vocab_size, 11);
      t0 = Clock::now();
      group.prefill(prompt, opt);
      const double s = seconds_since(t0);
      std::printf("| %lld | %s | %.3f | %.0f |\n", static_cast<long long>(n), mode.c_str(), s,
                  static_cast<double>(n) / s);
    }

  const int64_t context = args["context"].as<int64_t>(), steps = args["decode"].as<int64_t>();
  std::printf(
      "\n| batch | context | ms a step | ms a step a layer | ms/token | tokens/s | floor ms/token "
      "(batch 1) | of the floor |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  const double floor_ms = 1e3 * bytes_per_token / ranks / bandwidth;
  for (const int64_t b : args["batches"].as<std::vector<int64_t>>()) {
    const DecodeRow r = decode_steps(group, b, context, std::max<int64_t>(1, steps));
    std::printf("| %lld | %lld | %.3f | %.3f | %.3f | %.1f | %.3f | %.1f%% |\n",
                static_cast<long long>(b), static_cast<long long>(context), r.step_ms,
                r.step_ms / static_cast<double>(config.text.num_hidden_layers),
                r.step_ms / static_cast<double>(b), 1e3 * static_cast<double>(b) / r.step_ms,
                floor_ms, 100.0 * floor_ms / r.step_ms);
  }

  const fd::KvBytesPerToken kv = fd::kv_bytes_per_token(config);
  const int64_t kv_context = args["kv-context"].as<int64_t>();
  std::printf(
      "\nglobal KV of one sequence at %lld tokens, as one device holds it: %.2f GiB (%.0f B a "
      "token: main %.0f, index %.0f); window rings %.1f MiB a sequence\n",
      static_cast<long long>(kv_context),
      kv.total() * static_cast<double>(kv_context) / static_cast<double>(1ull << 30), kv.total(),
      kv.main, kv.index, static_cast<double>(kv.window_bytes_per_sequence) / (1 << 20));
  return 0;
}
