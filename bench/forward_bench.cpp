// Forward-pass timing on the CPU reference backend: a 256-token prefill (exact and bounded) and
// 32 greedy decode steps on a random checkpoint of a config (default: the every-role test
// model), with 1 thread as the same-run baseline. Prints a table of medians over the runs.
// --synthetic-weights SEED generates that checkpoint in memory instead of writing it to disk
// (synthetic_checkpoint.h): --model then names a config.json or a directory holding one.
//
//   forward_bench [--model DIR | --config FILE] [--synthetic-weights SEED] [--prompt N]
//                 [--decode N] [--runs N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_timing.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/synthetic_checkpoint.h"
#include "engine/model/model.h"
#include "engine/ops/cpu/cpu_backend.h"

namespace {

using flashdesk::bench::median;
using flashdesk::bench::seconds_since;

using flashdesk::bench::Clock;

struct Timing {
  double prefill_s = 0;
  double decode_s = 0;  // all decode steps
};

Timing run_once(flashdesk::Model& model, const std::vector<int32_t>& prompt, int64_t decode,
                flashdesk::PrefillMode mode) {
  flashdesk::SequenceState s = model.new_sequence();
  Timing t;
  auto t0 = Clock::now();
  std::vector<float> logits = model.prefill(s, prompt, flashdesk::PrefillOptions{mode, 0, false});
  t.prefill_s = seconds_since(t0);
  t0 = Clock::now();
  for (int64_t i = 0; i < decode; ++i) {
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    logits = model.decode(s, next);
  }
  t.decode_s = seconds_since(t0);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("forward_bench", "Forward-pass timing on the CPU reference backend");
  options.add_options()(
      "config", "config of a random checkpoint to time (default: the every-role test model)",
      cxxopts::value<std::string>()->default_value(
          (std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/test-every-role.json").string()))(
      "model", "a model directory instead of --config",
      cxxopts::value<std::string>()->default_value(""))(
      "synthetic-weights", "generate the weights in memory with this seed (no files)",
      cxxopts::value<uint64_t>())("prompt", "prompt tokens",
                                  cxxopts::value<int64_t>()->default_value("256"))(
      "decode", "decode steps", cxxopts::value<int64_t>()->default_value("32"))(
      "runs", "runs per measurement (median)", cxxopts::value<int64_t>()->default_value("3"));
  const auto args = flashdesk::bench::parse_options(options, argc, argv);
  const std::string config = args["config"].as<std::string>();
  std::string model_dir = args["model"].as<std::string>();
  const int64_t prompt_len = args["prompt"].as<int64_t>(), decode = args["decode"].as<int64_t>(),
                runs = std::max<int64_t>(1, args["runs"].as<int64_t>());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("flashdesk-forward-bench-" + std::to_string(::getpid()));
  std::optional<flashdesk::SyntheticWeights> synthetic;
  if (args.count("synthetic-weights")) {
    synthetic.emplace();
    synthetic->seed = args["synthetic-weights"].as<uint64_t>();
    if (model_dir.empty()) model_dir = config;
  } else if (model_dir.empty()) {
    flashdesk::RandomCheckpointOptions o;
    o.seed = 1;
    flashdesk::write_random_checkpoint(config, dir, o);
    model_dir = dir.string();
  }
  std::shared_ptr<const flashdesk::Checkpoint> ckpt =
      flashdesk::open_checkpoint(model_dir, synthetic);
  const int64_t V = ckpt->config().text.vocab_size;
  std::mt19937 rng(1);
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
  for (auto& id : prompt) id = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(V - 3));

  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("forward_bench: %s, prompt %lld, decode %lld, median of %lld runs, cpu-reference\n\n",
              ckpt->config().name.c_str(), static_cast<long long>(prompt_len),
              static_cast<long long>(decode), static_cast<long long>(runs));
  std::printf(
      "| threads | prefill | prefill s | prefill tok/s | decode tok/s | total s | vs 1 thread |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  double baseline = 0;
  for (int threads : {1, hw}) {
    if (threads == hw && hw == 1) break;
    flashdesk::CpuReferenceBackend be(threads);
    flashdesk::Model model(ckpt, be);
    for (auto mode : {flashdesk::PrefillMode::Exact, flashdesk::PrefillMode::Bounded}) {
      std::vector<double> pf, dc;
      for (int64_t r = 0; r < runs; ++r) {
        const Timing t = run_once(model, prompt, decode, mode);
        pf.push_back(t.prefill_s);
        dc.push_back(t.decode_s);
      }
      const double p = median(pf), d = median(dc), total = p + d;
      if (baseline == 0) baseline = total;
      std::printf("| %d | %s | %.3f | %.0f | %.1f | %.3f | %.2fx |\n", threads,
                  mode == flashdesk::PrefillMode::Exact ? "exact" : "bounded", p, prompt_len / p,
                  decode / d, total, baseline / total);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
