// Decode and prefill speed of a model on this machine's CPU backends, set against the memory
// roofline measured in the same run: weight bytes a decoded token reads, over the bandwidth of
// memcpy with every core. Also bounded vs exact prefill at a long prompt (docs/model-spec.md
// §3.9: bounded replays the decoder over the last window only).
//
//   decode_roofline_bench [--model DIR] [--synthetic-weights SEED] [--decode N] [--prompt N]
//                         [--long N] [--runs N]
//   defaults: the bundled demo model, 64 decode steps after a 512-token prompt, an 8192-token
//   prompt for the prefill-mode table, median of 3 runs. --synthetic-weights: the weights
//   generated in memory (synthetic_checkpoint.h), --model naming a config.json or its directory.
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
#include "bench/model_speed.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/synthetic_checkpoint.h"
#include "engine/model/model.h"
#include "engine/runtime/backend_factory.h"

namespace {

using flashdesk::bench::median;
using flashdesk::bench::memcpy_bandwidth;
using flashdesk::bench::random_prompt;
using flashdesk::bench::seconds_since;
using flashdesk::bench::weight_bytes_per_token;

using flashdesk::PrefillMode;
using flashdesk::bench::Clock;

struct Speed {
  double prefill_s = 0, decode_tok_s = 0;
};

Speed measure(flashdesk::Model& model, const std::vector<int32_t>& prompt, int64_t decode,
              int64_t runs) {
  std::vector<double> pf, dc;
  for (int64_t r = 0; r < runs; ++r) {
    flashdesk::SequenceState s = model.new_sequence();
    auto t0 = Clock::now();
    std::vector<float> logits = model.prefill(s, prompt, {PrefillMode::Bounded, 0, false});
    pf.push_back(seconds_since(t0));
    t0 = Clock::now();
    for (int64_t i = 0; i < decode; ++i) {
      const auto next = std::max_element(logits.begin(), logits.end()) - logits.begin();
      logits = model.decode(s, static_cast<int32_t>(next));
    }
    dc.push_back(static_cast<double>(decode) / seconds_since(t0));
  }
  return {median(pf), median(dc)};
}

double prefill_seconds(flashdesk::Model& model, const std::vector<int32_t>& prompt,
                       PrefillMode mode, int64_t runs) {
  std::vector<double> v;
  for (int64_t r = 0; r < runs; ++r) {
    flashdesk::SequenceState s = model.new_sequence();
    const auto t0 = Clock::now();
    model.prefill(s, prompt, {mode, 0, false});
    v.push_back(seconds_since(t0));
  }
  return median(v);
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("decode_roofline_bench",
                           "Decode and prefill speed against the memory roofline");
  options.add_options()(
      "model", "model directory",
      cxxopts::value<std::string>()->default_value(
          (std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny").string()))(
      "decode", "decode steps after the prompt", cxxopts::value<int64_t>()->default_value("64"))(
      "prompt", "prompt tokens of the speed table",
      cxxopts::value<int64_t>()->default_value("512"))(
      "long", "prompt tokens of the prefill-mode table",
      cxxopts::value<int64_t>()->default_value("8192"))(
      "runs", "runs per measurement (median)", cxxopts::value<int64_t>()->default_value("3"))(
      "synthetic-weights", "generate the weights in memory with this seed (no files)",
      cxxopts::value<uint64_t>());
  const auto args = flashdesk::bench::parse_options(options, argc, argv);
  const std::string model_dir = args["model"].as<std::string>();
  std::optional<flashdesk::SyntheticWeights> synthetic;
  if (args.count("synthetic-weights")) {
    synthetic.emplace();
    synthetic->seed = args["synthetic-weights"].as<uint64_t>();
  }
  const int64_t decode = args["decode"].as<int64_t>(), prompt_len = args["prompt"].as<int64_t>(),
                long_len = args["long"].as<int64_t>(),
                runs = std::max<int64_t>(1, args["runs"].as<int64_t>());
  std::shared_ptr<const flashdesk::Checkpoint> ckpt =
      flashdesk::open_checkpoint(model_dir, synthetic);
  const int64_t vocab = ckpt->config().text.vocab_size;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double bytes_per_token = weight_bytes_per_token(*ckpt);
  const double bandwidth = memcpy_bandwidth(hw);
  const double roofline = bandwidth / bytes_per_token;
  std::printf("decode_roofline_bench: %s, %d threads, median of %lld runs\n",
              ckpt->config().name.c_str(), hw, static_cast<long long>(runs));
  std::printf(
      "weight bytes per decoded token: %.2f MB; memcpy bandwidth (read+write): %.2f GB/s;"
      " roofline: %.0f tok/s\n\n",
      bytes_per_token / 1e6, bandwidth / 1e9, roofline);

  std::printf(
      "| backend | prompt | prefill tok/s | decode tok/s | of roofline | vs cpu-reference |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  const auto prompt = random_prompt(prompt_len, vocab);
  double baseline = 0;
  for (const char* name : {"cpu-reference", "cpu"}) {
    const auto backend = flashdesk::make_backend(name, hw);
    flashdesk::Model model(ckpt, *backend);
    const Speed s = measure(model, prompt, decode, runs);
    if (baseline == 0) baseline = s.decode_tok_s;
    std::printf("| %s | %lld | %.0f | %.1f | %.1f%% | %.2fx |\n", name,
                static_cast<long long>(prompt_len), static_cast<double>(prompt_len) / s.prefill_s,
                s.decode_tok_s, 100.0 * s.decode_tok_s / roofline, s.decode_tok_s / baseline);
  }

  std::printf("\n| backend | prompt | exact s | bounded s | bounded / exact |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  const auto long_prompt = random_prompt(long_len, vocab);
  const auto backend = flashdesk::make_backend("cpu", hw);
  flashdesk::Model model(ckpt, *backend);
  const double exact = prefill_seconds(model, long_prompt, PrefillMode::Exact, runs);
  const double bounded = prefill_seconds(model, long_prompt, PrefillMode::Bounded, runs);
  std::printf("| cpu | %lld | %.2f | %.2f | %.2f |\n", static_cast<long long>(long_len), exact,
              bounded, bounded / exact);
  return 0;
}
