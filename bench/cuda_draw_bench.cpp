// Drawing a synthetic checkpoint's linears on the GPU (CudaBackend::draw_linear, random_draw.h)
// against what a load does without it, measured in the same run: the host generating them on
// every thread (Checkpoint::tensor) and the backend uploading them. V4.1-Flash's attention,
// router and head of one layer and a sample of its routed experts; values per second by storage
// format, the units the host regenerated, and the whole model's linears at each rate.
//
//   cuda_draw_bench [--config FILE] [--layer N] [--experts N] [--device N]
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_timing.h"
#include "engine/checkpoint/synthetic_checkpoint.h"
#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/cuda_devices.h"

namespace {

namespace fd = flashdesk;
using fd::bench::Clock;
using fd::bench::seconds_since;

struct Sample {
  double values = 0, draw_s = 0, host_s = 0;
};

std::string format_of(const fd::RandomWeightRecipe& r) {
  return fd::random_format_name(r.format, r.dtype);
}

double values_of(const fd::RandomWeightRecipe& r) {
  return static_cast<double>(r.rows) * static_cast<double>(r.cols);
}

// The linears a load of `layer` draws, with `experts` of its routed experts, and the head.
std::vector<std::string> sampled_linears(const fd::Checkpoint& ckpt, int64_t layer,
                                         int64_t experts) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  std::vector<std::string> names;
  for (const std::string& name : ckpt.tensor_names()) {
    if (!ckpt.random_recipe(name)) continue;
    const bool expert = name.find(".ffn.experts.") != std::string::npos;
    if (expert) {
      const size_t at = name.find(".ffn.experts.") + 13;
      if (std::stoll(name.substr(at)) >= experts) continue;
    }
    if (name.starts_with(p) || name == "head.weight") names.push_back(name);
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("cuda_draw_bench",
                           "Synthetic linears drawn on the GPU against host generation + upload");
  options.add_options()(
      "config", "config.json",
      cxxopts::value<std::string>()->default_value(
          (std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/deepseek-v4.1-flash.json")
              .string()))("layer", "main layer sampled",
                          cxxopts::value<int64_t>()->default_value("2"))(
      "experts", "routed experts of it sampled", cxxopts::value<int64_t>()->default_value("16"))(
      "device", "GPU index", cxxopts::value<int>()->default_value("0"));
  const auto args = fd::bench::parse_options(options, argc, argv);
  if (fd::cuda_devices().empty()) {
    std::printf("cuda_draw_bench: no CUDA device (%s); nothing measured\n",
                fd::cuda_unavailable_reason().c_str());
    return 0;
  }
  const int64_t layer = args["layer"].as<int64_t>();
  fd::SyntheticWeights w;
  w.seed = 1;
  w.layers = {layer};
  const auto ckpt = fd::open_synthetic_checkpoint(args["config"].as<std::string>(), w);
  const std::vector<std::string> names =
      sampled_linears(*ckpt, layer, args["experts"].as<int64_t>());
  fd::CudaBackend gpu(args["device"].as<int>());
  gpu.set_draw_weights(true);
  {  // the kernel's first launch and the device's start, outside the timings
    const auto r = ckpt->random_recipe(names.front());
    gpu.draw_linear(*r, 0, std::min<int64_t>(r->rows, 32));
  }
  const fd::CudaBackend::DrawStats before = gpu.draw_stats();

  // The two paths take turns tensor by tensor, so drift in the machine falls on both.
  std::map<std::string, Sample> by_format;
  for (const std::string& name : names) {
    const fd::RandomWeightRecipe r = *ckpt->random_recipe(name);
    Sample& s = by_format[format_of(r)];
    s.values += values_of(r);
    auto t0 = Clock::now();
    { fd::LinearWeight drawn = gpu.draw_linear(r, 0, r.rows); }  // waits for its flags
    s.draw_s += seconds_since(t0);
    t0 = Clock::now();
    {
      const fd::TensorView wv = ckpt->tensor(name);
      const fd::TensorView sv = r.scale.empty() ? fd::TensorView{} : ckpt->tensor(r.scale);
      fd::LinearWeight up = gpu.upload_linear(wv, r.scale.empty() ? nullptr : &sv);
      gpu.synchronize();
      ckpt->release_tensor(name);
      if (!r.scale.empty()) ckpt->release_tensor(r.scale);
    }
    s.host_s += seconds_since(t0);
  }
  const fd::CudaBackend::DrawStats& after = gpu.draw_stats();

  // The whole model's drawable linears by format.
  const auto whole = fd::open_synthetic_checkpoint(args["config"].as<std::string>(), {});
  std::map<std::string, double> model_values;
  for (const std::string& name : whole->tensor_names())
    if (const auto r = whole->random_recipe(name)) model_values[format_of(*r)] += values_of(*r);

  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("cuda_draw_bench: %s on %s, layer %lld, %zu linears; host: %d threads + upload\n\n",
              ckpt->config().name.c_str(), gpu.device().name.c_str(), static_cast<long long>(layer),
              names.size(), hw);
  std::printf(
      "| format | sampled G values | GPU draw s | GPU G values/s | host + upload s | host G "
      "values/s | GPU / host | whole model G values | whole model s, GPU | whole model s, host "
      "|\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  double gpu_total = 0, host_total = 0;
  for (const auto& [format, s] : by_format) {
    const double n = model_values[format];
    const double g = s.values / s.draw_s, h = s.values / s.host_s;
    gpu_total += n / g;
    host_total += n / h;
    std::printf("| %s | %.3f | %.3f | %.2f | %.3f | %.3f | %.1fx | %.1f | %.1f | %.0f |\n",
                format.c_str(), s.values / 1e9, s.draw_s, g / 1e9, s.host_s, h / 1e9, g / h,
                n / 1e9, n / g, n / h);
  }
  std::printf(
      "\nunits (rows; FP8 tiles: 32-row groups) drawn: %llu, regenerated by the host: %llu\n"
      "whole model's drawable linears: %.0f s drawn on this GPU, %.0f s generated here and "
      "uploaded\n",
      static_cast<unsigned long long>(after.units - before.units),
      static_cast<unsigned long long>(after.host_units - before.host_units), gpu_total, host_total);
  return 0;
}
