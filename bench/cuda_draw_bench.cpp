// Drawing a synthetic checkpoint's linears on the GPU (CudaBackend::draw_linear, random_draw.h)
// against what a load does without it, measured in the same run: the host generating them on
// every thread (Checkpoint::tensor) and the backend uploading them. V4.1-Flash's attention,
// router and head of one layer and a sample of its routed experts, and the first rows of an Engram
// table (CudaBackend::draw_into_host: drawn, then copied to host memory, against the host's
// threads writing them there); values per second by storage format, the units the host regenerated,
// and the whole model at each rate.
//
//   cuda_draw_bench [--config FILE] [--layer N] [--experts N] [--table-rows N] [--device N]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
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
    const auto recipe = ckpt.random_recipe(name);
    if (!recipe || recipe->format == fd::RandomTensorPlan::Format::Fp8Rows) continue;
    const bool expert = name.find(".ffn.experts.") != std::string::npos;
    if (expert) {
      const size_t at = name.find(".ffn.experts.") + 13;
      if (std::stoll(name.substr(at)) >= experts) continue;
    }
    if (name.starts_with(p) || name == "head.weight") names.push_back(name);
  }
  return names;
}

// The first `rows` rows of the table `r` into host memory as a load without drawing makes them:
// write_random_rows on `threads` threads, each a contiguous share.
void host_table_rows(const fd::RandomWeightRecipe& r, int64_t rows, int threads, uint8_t* codes,
                     uint8_t* scales) {
  std::vector<std::jthread> pool;
  for (int t = 0; t < threads; ++t) {
    const int64_t a = rows * t / threads, b = rows * (t + 1) / threads;
    if (a < b)
      pool.emplace_back([&r, a, b, codes, scales] {
        r.host_rows(a, b, codes + a * r.cols, scales + a * (r.cols / 32));
      });
  }
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
      "table-rows", "first rows of an Engram table sampled (0: none)",
      cxxopts::value<int64_t>()->default_value("4194304"))(
      "device", "GPU index", cxxopts::value<int>()->default_value("0"));
  const auto args = fd::bench::parse_options(options, argc, argv);
  if (fd::cuda_devices().empty()) {
    std::printf("cuda_draw_bench: no CUDA device (%s); nothing measured\n",
                fd::cuda_unavailable_reason().c_str());
    return 0;
  }
  const int64_t layer = args["layer"].as<int64_t>();
  const std::string config = args["config"].as<std::string>();
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  fd::SyntheticWeights w;
  w.seed = 1;
  w.layers = {layer};
  // With the first Engram layer, for its table.
  const std::vector<int64_t> engram =
      fd::open_synthetic_checkpoint(config, w)->config().text.engram_layer_ids;
  if (!engram.empty() && engram.front() != layer) w.layers.push_back(engram.front());
  std::sort(w.layers.begin(), w.layers.end());
  const auto ckpt = fd::open_synthetic_checkpoint(config, w);
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
  const fd::CudaBackend::DrawStats linears = gpu.draw_stats();

  // An Engram table's first rows: drawn into host memory, and written there by the host.
  std::optional<fd::RandomWeightRecipe> table;
  if (!engram.empty() && args["table-rows"].as<int64_t>() > 0)
    table =
        ckpt->random_recipe("layers." + std::to_string(engram.front()) + ".engram.embed.weight");
  bool table_same = false;
  if (table) {
    table->rows = std::min(table->rows, args["table-rows"].as<int64_t>());
    Sample& s = by_format[format_of(*table)];
    s.values = values_of(*table);
    // Both written into buffers already touched, as the checkpoint's are not: the same cost.
    const auto bytes = static_cast<size_t>(table->rows * table->cols);
    std::vector<uint8_t> codes(bytes), scales(bytes / 32), host_codes(bytes),
        host_scales(bytes / 32);
    auto t0 = Clock::now();
    gpu.draw_into_host(*table, codes.data(), scales.data());
    s.draw_s = seconds_since(t0);
    t0 = Clock::now();
    host_table_rows(*table, table->rows, hw, host_codes.data(), host_scales.data());
    s.host_s = seconds_since(t0);
    table_same = codes == host_codes && scales == host_scales;
  }

  // The whole model's drawable weights by format.
  const auto whole = fd::open_synthetic_checkpoint(config, {});
  std::map<std::string, double> model_values;
  for (const std::string& name : whole->tensor_names())
    if (const auto r = whole->random_recipe(name)) model_values[format_of(*r)] += values_of(*r);

  std::printf("cuda_draw_bench: %s on %s, layer %lld, %zu linears; host: %d threads\n\n",
              ckpt->config().name.c_str(), gpu.device().name.c_str(), static_cast<long long>(layer),
              names.size(), hw);
  std::printf(
      "| format | sampled G values | GPU draw s | GPU G values/s | host s | host G values/s | "
      "GPU / host | whole model G values | whole model s, GPU | whole model s, host |\n");
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
  const fd::CudaBackend::DrawStats& all = gpu.draw_stats();
  std::printf(
      "\nhost s: the linears generated on every thread and uploaded; the table's rows generated on "
      "every thread into host memory (the GPU's: drawn and copied there).\n"
      "units (rows; FP8 tiles: 32-row groups) drawn: linears %llu, table %llu; regenerated by the "
      "host: linears %llu, table %llu\n"
      "whole model (the formats sampled): %.0f s drawn on this GPU, %.0f s on the host here\n",
      static_cast<unsigned long long>(linears.units - before.units),
      static_cast<unsigned long long>(all.units - linears.units),
      static_cast<unsigned long long>(linears.host_units - before.host_units),
      static_cast<unsigned long long>(all.host_units - linears.host_units), gpu_total, host_total);
  if (table)
    std::printf("table %s, first %lld rows: drawn and host bytes equal: %s\n",
                std::string(table->weight).c_str(), static_cast<long long>(table->rows),
                table_same ? "yes" : "NO");
  return 0;
}
