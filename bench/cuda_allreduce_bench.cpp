// NCCL all-reduce latency at the sizes a decoded token's layers sum (issue 22: about 10-40 KB a
// call at batch 1) over 1..N GPUs of this machine (make_nccl_collectives, one thread a rank, as
// RankGroup runs them): each call waited for on its own, calls back to back, and the same calls
// inside a step graph (CudaBackend step graphs: the first step captured, the next ones
// replayed); medians, in microseconds a call. World 1 on one GPU (the machine lent most) measures
// what NCCL itself costs a call, with no peer to wait for.
//
//   cuda_allreduce_bench [--sizes-kb 10,20,40,1024] [--worlds 1,2,4,8] [--calls N] [--reps N]
#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_timing.h"
#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/cuda_devices.h"

namespace {

namespace fd = flashdesk;
using fd::bench::Clock;
using fd::bench::median;
using fd::bench::seconds_since;

struct Ranks {
  std::vector<std::unique_ptr<fd::CudaBackend>> backends;
  std::vector<std::unique_ptr<fd::Collective>> comms;
};

Ranks make_ranks(int world) {
  Ranks r;
  std::vector<fd::Backend*> raw;
  for (int d = 0; d < world; ++d) {
    r.backends.push_back(std::make_unique<fd::CudaBackend>(d));
    raw.push_back(r.backends.back().get());
  }
  r.comms = fd::make_nccl_collectives(raw);
  return r;
}

// fn(rank) on one thread a rank, joined; rank 0's seconds.
double on_every_rank(int world, const std::function<void(int)>& fn) {
  std::vector<std::jthread> threads;
  double seconds = 0;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      const auto t0 = Clock::now();
      fn(r);
      if (r == 0) seconds = seconds_since(t0);
    });
  threads.clear();
  return seconds;
}

struct Row {
  double waited_us = 0, streamed_us = 0, graph_us = 0;
};

Row measure(Ranks& ranks, int64_t floats, int64_t calls, int64_t reps) {
  const int world = static_cast<int>(ranks.backends.size());
  std::vector<fd::Tensor> t;
  for (auto& be : ranks.backends) {
    t.push_back(be->alloc(fd::DType::F32, fd::Shape{floats}));
    be->fill_zero(t.back());
    be->synchronize();
  }
  auto per_call = [&](const std::function<void(int)>& body) {
    std::vector<double> v;
    for (int64_t rep = 0; rep < reps + 1; ++rep) {  // the first is a warm-up
      const double s = on_every_rank(world, body);
      if (rep > 0) v.push_back(1e6 * s / static_cast<double>(calls));
    }
    return median(v);
  };
  Row row;
  row.waited_us = per_call([&](int k) {
    for (int64_t c = 0; c < calls; ++c) {
      ranks.comms[static_cast<size_t>(k)]->all_reduce_sum(t[static_cast<size_t>(k)]);
      ranks.backends[static_cast<size_t>(k)]->synchronize();
    }
  });
  row.streamed_us = per_call([&](int k) {
    for (int64_t c = 0; c < calls; ++c)
      ranks.comms[static_cast<size_t>(k)]->all_reduce_sum(t[static_cast<size_t>(k)]);
    ranks.backends[static_cast<size_t>(k)]->synchronize();
  });
  for (auto& be : ranks.backends) be->set_step_graphs(true);
  row.graph_us = per_call([&](int k) {
    fd::CudaBackend& be = *ranks.backends[static_cast<size_t>(k)];
    be.step_graph_begin(1);
    for (int64_t c = 0; c < calls; ++c)
      ranks.comms[static_cast<size_t>(k)]->all_reduce_sum(t[static_cast<size_t>(k)]);
    be.step_graph_end();
    be.synchronize();
  });
  for (auto& be : ranks.backends) be->set_step_graphs(false);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("cuda_allreduce_bench", "NCCL all-reduce latency at a token's sizes");
  options.add_options()("sizes-kb", "F32 all-reduce sizes, KiB",
                        cxxopts::value<std::vector<int64_t>>()->default_value("10,20,40,1024"))(
      "worlds", "GPU counts (those this machine has)",
      cxxopts::value<std::vector<int>>()->default_value("1,2,4,8"))(
      "calls", "calls a repetition", cxxopts::value<int64_t>()->default_value("100"))(
      "reps", "timed repetitions (median)", cxxopts::value<int64_t>()->default_value("9"));
  const auto args = fd::bench::parse_options(options, argc, argv);
  const auto devices = fd::cuda_devices();
  if (devices.empty()) {
    std::printf("cuda_allreduce_bench: no CUDA device (%s); nothing measured\n",
                fd::cuda_unavailable_reason().c_str());
    return 0;
  }
  const int64_t calls = std::max<int64_t>(1, args["calls"].as<int64_t>());
  const int64_t reps = std::max<int64_t>(1, args["reps"].as<int64_t>());
  std::printf("cuda_allreduce_bench: %zu x %s; %lld calls a repetition, median of %lld\n\n",
              devices.size(), devices.front().name.c_str(), static_cast<long long>(calls),
              static_cast<long long>(reps));
  std::printf(
      "| GPUs | KiB | waited µs a call | back to back µs | in a step graph µs | graph / "
      "back to back |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const int world : args["worlds"].as<std::vector<int>>()) {
    if (world < 1 || world > static_cast<int>(devices.size())) continue;
    Ranks ranks;
    try {
      ranks = make_ranks(world);
    } catch (const std::exception& e) {  // no NCCL (the CPU emulation, a machine without it)
      std::printf("| %d | | %s | | | |\n", world, e.what());
      continue;
    }
    for (const int64_t kb : args["sizes-kb"].as<std::vector<int64_t>>()) {
      const Row row = measure(ranks, kb * 1024 / 4, calls, reps);
      std::printf("| %d | %lld | %.1f | %.1f | %.1f | %.2fx |\n", world, static_cast<long long>(kb),
                  row.waited_us, row.streamed_us, row.graph_us, row.graph_us / row.streamed_us);
    }
  }
  return 0;
}
