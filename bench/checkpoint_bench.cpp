// Checkpoint benchmarks: opening and validating the full-size layout (sparse skeleton, no
// weights), random weight generation and FP8/FP4 dequantisation, each against a same-run
// baseline. Usage (from the repository root):
//   checkpoint_bench [repeats=5] [config=assets/configs/deepseek-v4.1-flash.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/dequant.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/random_init.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/shard_index.h"

namespace fd = flashdesk;

namespace {

double median_seconds(int repeats, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const char* what, double seconds, double baseline, double units, const char* unit) {
  std::printf("  %-50s %9.4f s %7.2fx %10.1f k%s/s\n", what, seconds, seconds / baseline,
              units / seconds / 1e3, unit);
}

void bench_open(int repeats, const std::filesystem::path& config) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fd-bench-skeleton-" + std::to_string(::getpid()));
  fd::RandomCheckpointOptions options;
  options.skeleton = true;
  options.shard_bytes = uint64_t{10} << 30;
  fd::write_random_checkpoint(config, dir, options);
  const double headers = median_seconds(repeats, [&] {
    for (const auto& shard : fd::find_shards(dir).shards) fd::SafetensorsFile f(dir / shard);
  });
  const double open = median_seconds(repeats, [&] { fd::Checkpoint::open(dir); });
  std::printf("full-size layout (96,085 tensors, sparse shards), median of %d:\n", repeats);
  row("map + parse every shard header (baseline)", headers, headers, 96085, "tensor");
  row("Checkpoint::open (+ config, validation, digest)", open, headers, 96085, "tensor");
  std::filesystem::remove_all(dir);
}

void bench_generate_and_dequant(int repeats) {
  const int64_t rows = 1024, cols = 4096, n = rows * cols;
  std::vector<float> x(n);
  const fd::InitRule rule{1.0 / 64};
  const double uniforms = median_seconds(repeats, [&] {
    fd::SplitMix64 rng(1);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(rng.uniform());
  });
  const double normals = median_seconds(repeats, [&] {
    for (int64_t r = 0; r < rows; ++r) fd::random_row(1, "w", r, rule, x.data() + r * cols, cols);
  });
  std::printf("\nrandom weights, %lld values, one thread, median of %d:\n", (long long)n, repeats);
  row("splitmix64 uniforms (baseline)", uniforms, uniforms, double(n), "value");
  row("Box-Muller normals (make-random's draw)", normals, uniforms, double(n), "value");

  std::vector<uint8_t> codes(n, 0x38), scales((rows / 32) * (cols / 32), 127), packed(n / 2, 0x21),
      fp4_scales(rows * (cols / 32), 127);
  std::vector<float> out(n);
  const double copy = median_seconds(repeats, [&] { std::memcpy(out.data(), x.data(), n * 4); });
  const double fp8 = median_seconds(repeats, [&] {
    fd::dequant_fp8(codes.data(), scales.data(), rows, cols, 32, 32, out.data());
  });
  const double fp4 = median_seconds(
      repeats, [&] { fd::dequant_fp4(packed.data(), fp4_scales.data(), rows, cols, out.data()); });
  std::printf("\ndequantisation to FP32 [%lld x %lld], scalar reference, median of %d:\n",
              (long long)rows, (long long)cols, repeats);
  row("memcpy of the FP32 result (baseline)", copy, copy, double(n), "value");
  row("FP8 E4M3, 32x32 UE8M0 tiles", fp8, copy, double(n), "value");
  row("FP4 E2M1 packed, per-32 E8M0", fp4, copy, double(n), "value");
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  bench_open(repeats, argc > 2 ? argv[2] : "assets/configs/deepseek-v4.1-flash.json");
  bench_generate_and_dequant(repeats);
  return 0;
}
