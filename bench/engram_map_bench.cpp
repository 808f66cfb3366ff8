// Engram token map at load: parsing tokenizer.json (the baseline: a load does it anyway), building
// the compressed-token map from it (the first load of a published model), and reading it back from
// the cache (every later load), each the median of `repeats` runs. Usage (repository root):
//   engram_map_bench [repeats=5] [tokenizer=tests/data/tokenizers/deepseek-v3/tokenizer.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "engine/model/engram_map_cache.h"

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

void row(const char* what, double seconds, double baseline) {
  std::printf("  %-56s %8.4f s %7.2fx\n", what, seconds, seconds / baseline);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::filesystem::path tokenizer_path =
      argc > 2 ? std::filesystem::path(argv[2])
               : std::filesystem::path(FD_SOURCE_DIR) /
                     "tests/data/tokenizers/deepseek-v3/tokenizer.json";
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("fd-bench-engram-" + std::to_string(::getpid()));
  const double parse = median_seconds(repeats, [&] { fd::Tokenizer::from_file(tokenizer_path); });
  const fd::Tokenizer tok = fd::Tokenizer::from_file(tokenizer_path);
  fd::CachedTokenMap first, second;
  const double build = median_seconds(repeats, [&] {
    std::filesystem::remove_all(cache);
    first = fd::cached_compressed_token_map(tok, cache);
  });
  const double cached =
      median_seconds(repeats, [&] { second = fd::cached_compressed_token_map(tok, cache); });
  std::filesystem::remove_all(cache);
  if (first.origin != fd::TokenMapOrigin::Built || second.origin != fd::TokenMapOrigin::Cache ||
      first.map.ids != second.map.ids) {
    std::fprintf(stderr, "engram_map_bench: the cache did not return the built map\n");
    return 1;
  }
  std::printf("%s: %lld tokens -> %lld compressed ids, median of %d:\n",
              tokenizer_path.string().c_str(), static_cast<long long>(tok.size()),
              static_cast<long long>(first.map.size), repeats);
  row("parse tokenizer.json (baseline, every load)", parse, parse);
  row("first load: build the map + write the cache file", build, parse);
  row("later loads: read and check the cache file", cached, parse);
  return 0;
}
