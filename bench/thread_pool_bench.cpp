// thread_pool_bench: the cost of one parallel_for of the CPU backends' thread pool when loops come
// back to back, as in decoding (hundreds of small ops per token with a little single-threaded
// work between them), for idle threads that block at once (spin 0, the pool before 2026-12-01)
// against threads that poll for a while first. Usage: thread_pool_bench [THREADS]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_timing.h"
#include "engine/ops/cpu/thread_pool.h"

namespace {

using flashdesk::ThreadPool;
using namespace flashdesk::bench;

// A small loop body: a few hundred multiply-adds per index.
float work(std::vector<float>& data, int64_t b, int64_t e) {
  float acc = 0.0f;
  for (int64_t i = b; i < e; ++i)
    for (int k = 0; k < 64; ++k) acc += data[static_cast<size_t>((i * 64 + k) % 4096)] * 1.0001f;
  return acc;
}

// Microseconds per parallel_for over `loops` back-to-back loops of `n` indices, with `between`
// indices of work on the calling thread between loops.
double us_per_loop(ThreadPool& pool, int loops, int64_t n, int64_t between) {
  std::vector<float> data(4096, 1.0f);
  std::vector<float> sink(64, 0.0f);
  const auto t0 = Clock::now();
  for (int l = 0; l < loops; ++l) {
    pool.parallel_for(
        n, 1, [&](int64_t b, int64_t e) { sink[static_cast<size_t>(b % 64)] += work(data, b, e); });
    sink[0] += work(data, 0, between);
  }
  const double us = seconds_since(t0) * 1e6 / loops;
  if (sink[0] == 42.0f) std::printf(" ");  // keeps the work
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  constexpr int kLoops = 20000, kRuns = 5;
  std::printf("thread_pool_bench: %d threads, %d back-to-back loops, median of %d runs\n\n",
              threads, kLoops, kRuns);
  std::printf("| idle threads | loop size | work between | us per loop | vs spin 0 |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: |\n");
  for (const auto& [n, between] : {std::pair<int64_t, int64_t>{8, 0}, {8, 8}, {64, 8}}) {
    double base = 0.0;
    for (const int spin_us : {0, 50, 200}) {
      ThreadPool pool(threads, std::chrono::microseconds(spin_us));
      std::vector<double> runs;
      for (int r = 0; r < kRuns; ++r) runs.push_back(us_per_loop(pool, kLoops, n, between));
      const double us = median(runs);
      if (spin_us == 0) base = us;
      std::printf("| %s | %lld | %lld | %.2f | %.2fx |\n",
                  spin_us == 0 ? "block at once (spin 0)"
                               : (spin_us == 50 ? "spin 50 us" : "spin 200 us (default)"),
                  static_cast<long long>(n), static_cast<long long>(between), us, base / us);
    }
  }
  return 0;
}
