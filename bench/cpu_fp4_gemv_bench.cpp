// Benchmark of the CPU FP4 expert GEMV (issue 18): the decode-time linear of a full-shape routed
// expert of V4.1-Flash (w1 / w3 [2304, 5120], w2 [5120, 2304]) and a whole routed-expert step
// (6 experts, as the hybrid placement runs them on the CPU), per ISA path of the optimised backend,
// against memcpy measured in the same run. Every repetition runs memcpy and each variant back to
// back, so load from other processes on a shared machine hits them alike; the table shows medians.
//
// Usage: cpu_fp4_gemv_bench [--threads N] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_timing.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

using bench::Clock;
using bench::median;
using bench::seconds_since;

// Weight copies per shape: more bytes than the L3 cache, so every call streams from DRAM.
constexpr int kCopies = 12;

class Rng {
 public:
  uint32_t next() { return s_ = s_ * 1664525u + 1013904223u; }

 private:
  uint32_t s_ = 12345;
};

LinearWeight random_fp4(Backend& be, int64_t out, int64_t in, Rng& rng) {
  LinearWeight w;
  w.format = WeightFormat::Fp4Row;
  w.out = out;
  w.in = in;
  w.name = "bench";
  w.data = be.alloc(DType::I8, Shape{out, in / 2});
  for (size_t i = 0; i < w.data.nbytes(); ++i)
    w.data.bytes()[i] = static_cast<uint8_t>(rng.next() >> 24);
  w.scale = be.alloc(DType::F8_E8M0, Shape{out, in / 32});
  for (size_t i = 0; i < w.scale.nbytes(); ++i)
    w.scale.bytes()[i] = static_cast<uint8_t>(116 + rng.next() % 8);
  return w;
}

size_t weight_bytes(const LinearWeight& w) {
  return w.data.nbytes() + w.scale.nbytes();
}

// memcpy on `threads` threads, each copying its own 64 MiB; bytes copied per call.
class Memcpy {
 public:
  explicit Memcpy(int threads) : src_(threads), dst_(threads) {
    for (int i = 0; i < threads; ++i) {
      src_[i].assign(kBytes, static_cast<char>(i + 1));
      dst_[i].assign(kBytes, 0);
    }
  }
  void run() {
    std::vector<std::thread> pool;
    for (size_t i = 1; i < src_.size(); ++i)
      pool.emplace_back([this, i] { std::memcpy(dst_[i].data(), src_[i].data(), kBytes); });
    std::memcpy(dst_[0].data(), src_[0].data(), kBytes);
    for (auto& t : pool) t.join();
  }
  double bytes() const { return static_cast<double>(kBytes) * static_cast<double>(src_.size()); }

 private:
  static constexpr size_t kBytes = size_t{64} << 20;
  std::vector<std::vector<char>> src_, dst_;
};

// One measured case: a call per repetition on each backend, and the weight bytes it reads.
struct Case {
  std::string name;
  double bytes = 0;
  // (backend, call number): consecutive calls rotate over the weight copies, so no call finds
  // its weights in the cache where the call before it left them.
  std::function<void(Backend&, int)> call;
};

struct Result {
  std::string name;
  double bytes;
  std::vector<double> ms, best_ms;  // per backend: median and fastest repetition
  double memcpy_1, memcpy_all;      // GB/s (bytes copied per second), medians over the same reps
  double best_memcpy_1;             // GB/s of the fastest 1-thread copy
};

class Bench {
 public:
  Bench(int threads, int reps) : reps_(reps) {
    for (CpuIsa isa : supported_cpu_isas())
      if (isa != CpuIsa::Scalar)
        opt_.push_back(std::make_unique<CpuOptimizedBackend>(threads, isa));
    threads_ = opt_.front()->pool().size();
    copy_1_ = std::make_unique<Memcpy>(1);
    copy_all_ = std::make_unique<Memcpy>(threads_);
  }

  void run() {
    Backend& be = *opt_.front();
    Rng rng;
    const int64_t dim = 5120, inter = 2304;
    std::vector<LinearWeight> up, gate, down;
    for (int c = 0; c < kCopies; ++c) {
      up.push_back(random_fp4(be, inter, dim, rng));
      gate.push_back(random_fp4(be, inter, dim, rng));
      down.push_back(random_fp4(be, dim, inter, rng));
    }
    Tensor x_up = input(be, 2, dim, rng), x_down = input(be, 2, inter, rng);
    Tensor y_up = be.alloc(DType::F32, Shape{2, inter}),
           y_down = be.alloc(DType::F32, Shape{2, dim});
    // The kernel's compute ceiling: one weight that stays in the L2 cache.
    const LinearWeight cached = random_fp4(be, 256, 2048, rng);
    Tensor x_cached = input(be, 1, 2048, rng), y_cached = be.alloc(DType::F32, Shape{1, 256});
    measure({"in L2 [256,2048] n=1", static_cast<double>(weight_bytes(cached)),
             [&](Backend& b, int) { b.linear(x_cached, cached, kQuantLinear, y_cached); }});
    for (int64_t n : {1, 2}) {
      Tensor xu = x_up.rows(0, n), xd = x_down.rows(0, n);
      Tensor yu = y_up.rows(0, n), yd = y_down.rows(0, n);
      const std::string tokens = " n=" + std::to_string(n);
      measure({"w1 [2304,5120]" + tokens, static_cast<double>(weight_bytes(up[0])),
               [&](Backend& b, int call) { b.linear(xu, up[call % kCopies], kQuantLinear, yu); }});
      measure(
          {"w2 [5120,2304]" + tokens, static_cast<double>(weight_bytes(down[0])),
           [&](Backend& b, int call) { b.linear(xd, down[call % kCopies], kQuantLinear, yd); }});
    }
    // The routed experts of one decoded token: 6 of the 12 experts (w1, w3, w2 each).
    std::vector<ExpertWeights> experts;
    for (int e = 0; e < kCopies; ++e) experts.push_back({up[e], gate[e], down[e]});
    std::vector<const ExpertWeights*> ptrs;
    for (auto& e : experts) ptrs.push_back(&e);
    const int64_t k = 6;
    Tensor ids = be.alloc(DType::I32, Shape{1, k}), weights = be.alloc(DType::F32, Shape{1, k});
    Tensor x = input(be, 1, dim, rng), y = be.alloc(DType::F32, Shape{1, dim});
    const double moe_bytes =
        static_cast<double>(k * (2 * weight_bytes(up[0]) + weight_bytes(down[0])));
    measure({"moe_experts k=6 n=1", moe_bytes, [&](Backend& b, int call) {
               for (int64_t j = 0; j < k; ++j) {
                 ids.data<int32_t>()[j] = static_cast<int32_t>((call * k + j) % kCopies);
                 weights.data<float>()[j] = 1.0f / static_cast<float>(k);
               }
               b.moe_experts(x, ids, weights, ptrs, nullptr, 10.0f, y);
             }});
    print();
  }

 private:
  static Tensor input(Backend& be, int64_t n, int64_t d, Rng& rng) {
    Tensor t = be.alloc(DType::F32, Shape{n, d});
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] =
          round_bf16((static_cast<float>(rng.next() >> 8) / 16777216.0f - 0.5f) * 4);
    return t;
  }

  static double seconds(const std::function<void()>& fn) {
    const auto t0 = Clock::now();
    fn();
    return seconds_since(t0);
  }

  // Repetitions of [memcpy 1 thread, memcpy all threads, each backend], medians of each.
  void measure(const Case& c) {
    const size_t variants = 2 + opt_.size();
    std::vector<std::vector<double>> t(variants);
    for (int rep = 0; rep <= reps_; ++rep)
      for (size_t v = 0; v < variants; ++v) {
        // A pause first, so the previous variant's spinning pool threads have gone to sleep.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const double s = seconds([&] {
          if (v == 0)
            copy_1_->run();
          else if (v == 1)
            copy_all_->run();
          else
            c.call(*opt_[v - 2], rep * static_cast<int>(variants) + static_cast<int>(v));
        });
        if (rep > 0) t[v].push_back(s);  // rep 0 warms up
      }
    Result r{c.name,
             c.bytes,
             {},
             {},
             copy_1_->bytes() / median(t[0]) / 1e9,
             copy_all_->bytes() / median(t[1]) / 1e9,
             copy_1_->bytes() / *std::min_element(t[0].begin(), t[0].end()) / 1e9};
    for (size_t v = 2; v < variants; ++v) {
      r.ms.push_back(1e3 * median(t[v]));
      r.best_ms.push_back(1e3 * *std::min_element(t[v].begin(), t[v].end()));
    }
    results_.push_back(r);
    std::fprintf(stderr, "  %s done\n", c.name.c_str());
  }

  void print() const {
    std::printf("threads: %d   reps: %d (interleaved; medians)   weights: %d copies per shape\n",
                threads_, reps_, kCopies);
    std::printf("memcpy: bytes copied per second, 1 thread and %d threads, in the same reps\n\n",
                threads_);
    std::printf("| %-20s | %-7s | %8s | %8s | %9s | %9s | %8s | %9s | %8s |\n", "case", "isa", "ms",
                "GB/s", "% memcpy1", "% memcpyN", "vs avx2", "best GB/s", "best %");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(22, '-').c_str(),
                std::string(9, '-').c_str(), std::string(10, '-').c_str(),
                std::string(10, '-').c_str(), std::string(11, '-').c_str(),
                std::string(11, '-').c_str(), std::string(10, '-').c_str(),
                std::string(11, '-').c_str(), std::string(10, '-').c_str());
    for (const Result& r : results_) {
      std::printf("| %-20s | %-7s | %8s | %8.2f | %9s | %9s | %8s | %9.2f | %8s |\n",
                  r.name.c_str(), "memcpy", "", r.memcpy_1, "", "", "", r.best_memcpy_1, "");
      for (size_t i = 0; i < r.ms.size(); ++i) {
        const double gbs = r.bytes / (r.ms[i] * 1e-3) / 1e9;
        const double best = r.bytes / (r.best_ms[i] * 1e-3) / 1e9;
        std::printf(
            "| %-20s | %-7s | %8.3f | %8.2f | %8.0f%% | %8.0f%% | %7.2fx | %9.2f | %7.0f%% |\n", "",
            std::string(cpu_isa_name(opt_[i]->isa())).c_str(), r.ms[i], gbs,
            100.0 * gbs / r.memcpy_1, 100.0 * gbs / r.memcpy_all, r.ms[0] / r.ms[i], best,
            100.0 * best / r.best_memcpy_1);
      }
    }
    std::printf(
        "\nGB/s: weight bytes (codes + scales) per call over the median time; the memcpy row is "
        "the "
        "1-thread copy rate (%% memcpyN: against the %d-thread one). best: the fastest repetition "
        "of each (GEMV and 1-thread memcpy), what an unloaded machine gives.\n",
        threads_);
  }

  int reps_;
  int threads_ = 1;
  std::vector<std::unique_ptr<CpuOptimizedBackend>> opt_;
  std::unique_ptr<Memcpy> copy_1_, copy_all_;
  std::vector<Result> results_;
};

}  // namespace
}  // namespace flashdesk

int main(int argc, char** argv) {
  int threads = 0, reps = 31;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  flashdesk::Bench(threads, reps).run();
  return 0;
}
