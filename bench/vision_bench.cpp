// Image encoding time on the demo model (assets/models/flash-tiny or --model DIR): the largest
// image the vision config admits (a 1000x1000 picture letterboxed to the token budget) and a
// small one (the 168x168 demo picture), split into decode + preprocess and ViT + aligner, on
// the CPU reference backend with 1 thread (the same-run baseline) and on the optimised CPU
// backend with every core. Prints medians over --runs.
//
//   vision_bench [--model DIR] [--image FILE] [--runs N]   (defaults relative to the repository
//   root: assets/models/flash-tiny and assets/eval/demo/images/image-0.png)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_timing.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "engine/vision/vision_encoder.h"

namespace {

using flashdesk::bench::median;

using flashdesk::bench::Clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A 1000x1000 picture with detail everywhere (the resize cost does not depend on content).
flashdesk::RgbImage large_picture() {
  flashdesk::RgbImage im{1000, 1000, {}};
  im.pixels.resize(1000 * 1000 * 3);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 7 % 251);
  return im;
}

struct Case {
  std::string name;
  std::function<flashdesk::RgbImage()> load;  // decode (file) or build (memory)
};

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("vision_bench", "Image encoding time on the demo model");
  options.add_options()("model", "model directory (with a vision tower)",
                        cxxopts::value<std::string>()->default_value("assets/models/flash-tiny"))(
      "image", "the small picture to decode",
      cxxopts::value<std::string>()->default_value("assets/eval/demo/images/image-0.png"))(
      "runs", "runs per measurement (median)", cxxopts::value<int>()->default_value("5"));
  const auto args = flashdesk::bench::parse_options(options, argc, argv);
  const std::filesystem::path model_dir = args["model"].as<std::string>();
  const std::filesystem::path small_file = args["image"].as<std::string>();
  const int runs = std::max(1, args["runs"].as<int>());
  const auto ckpt = flashdesk::Checkpoint::open(model_dir);
  const flashdesk::VisionConfig& vc = ckpt->config().vision.value();
  std::vector<Case> cases;
  cases.push_back(Case{"large (1000x1000 in memory)", large_picture});
  cases.push_back(Case{"small (" + small_file.filename().string() + ")",
                       [&] { return flashdesk::load_image(small_file); }});
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  struct Backend {
    std::string name;
    std::unique_ptr<flashdesk::Backend> be;
  };
  std::vector<Backend> backends;
  backends.push_back(
      {"cpu-reference, 1 thread", std::make_unique<flashdesk::CpuReferenceBackend>(1)});
  backends.push_back({"cpu-reference, " + std::to_string(cores) + " threads",
                      std::make_unique<flashdesk::CpuReferenceBackend>(cores)});
  backends.push_back({"cpu (optimised), " + std::to_string(cores) + " threads",
                      std::make_unique<flashdesk::CpuOptimizedBackend>(cores)});

  std::printf("vision encode, %s (ViT %lld blocks x %lld dim), median of %d runs\n",
              model_dir.filename().c_str(), static_cast<long long>(vc.num_hidden_layers),
              static_cast<long long>(vc.hidden_size), runs);
  std::printf("%-28s %-30s %9s %8s %13s %11s %9s\n", "image", "backend", "processed", "patches",
              "decode+prep", "vit+align", "vs base");
  for (const Case& c : cases) {
    std::vector<double> prep;
    flashdesk::PreprocessedImage img;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = Clock::now();
      img = flashdesk::preprocess_image(c.load(), vc);
      prep.push_back(ms_since(t0));
    }
    double base = 0.0;
    for (Backend& b : backends) {
      flashdesk::VisionEncoder enc(*ckpt, *b.be);
      enc.encode(img);  // warm-up: RoPE tables, buffers
      std::vector<double> t;
      for (int r = 0; r < runs; ++r) {
        const auto t0 = Clock::now();
        const flashdesk::Tensor rows = enc.encode(img);
        t.push_back(ms_since(t0));
      }
      const double m = median(t);
      if (base == 0.0) base = m;
      const std::string size = std::to_string(img.vit_h * vc.patch_size) + "x" +
                               std::to_string(img.vit_w * vc.patch_size);
      std::printf("%-28s %-30s %9s %8lld %10.2f ms %8.2f ms %8.2fx\n", c.name.c_str(),
                  b.name.c_str(), size.c_str(), static_cast<long long>(img.vit_h * img.vit_w),
                  median(prep), m, base / m);
    }
  }
  return 0;
}
