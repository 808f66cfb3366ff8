// The decode GEMVs (1..8 activation rows) of the V4.1 layer shapes and one MoE step on the CUDA
// backend, against the device-to-device copy bandwidth measured in the same run: how close the
// weight-streaming kernels come to the memory system. Weights are random, generated on the device.
// Each repetition is timed on its own with events, behind an untimed device copy that evicts the
// weights from L2 (so they come from DRAM, as in a decode step) and keeps the GPU busy while the
// host enqueues the timed op (so launch latency is not counted, except between an op's own
// kernels). Prints a markdown table; "of copy BW" is weight bytes per second over the copy's read
// plus written bytes per second, as in cuda_layer_bench. Each op's weights are also read by a
// kernel that does nothing else ("read alone", n 0): what one launch streaming those bytes takes;
// last, a window-only layer's weights read in one launch, in a launch an operation, and in one
// launch whose reads of each operation are used only after those of the one before (read_phases:
// weights streamed across the operations' ends); the MoE step's up and down alike.
//
//   cuda_gemv_bench [--rows 1,2,4,8] [--reps N] [--warmup N] [--device N] [--copy-mb N]
//                   [--cover-mb N] [--no-moe (no MoE steps, no layer read)]
#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_timing.h"
#include "bench/cuda_bench_main.h"
#include "engine/ops/cuda/bench_support.h"
#include "engine/ops/cuda/cuda_devices.h"

namespace {

using flashdesk::CudaBackend;
using flashdesk::DType;
using flashdesk::ExpertWeights;
using flashdesk::LinearWeight;
using flashdesk::Shape;
using flashdesk::Tensor;
using flashdesk::WeightFormat;
namespace cb = flashdesk::cuda_bench;

struct Options {
  std::vector<int64_t> rows;
  int64_t reps = 20, warmup = 3, copy_mb = 2048, cover_mb = 128;
  int device = 0;
  bool moe = true;
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Random device weights of the checkpoint formats (bench/cuda_layer.cpp's distributions).
class Weights {
 public:
  explicit Weights(CudaBackend& be) : be_(be) {}

  LinearWeight make(WeightFormat f, int64_t out, int64_t in) {
    LinearWeight w{f, out, in, 32, {}, {}, "bench"};
    switch (f) {
      case WeightFormat::Fp8Block:
        w.data = tensor(DType::F8_E4M3, Shape{out, in}, {cb::Fill::Fp8Codes});
        w.scale = tensor(DType::F8_E8M0, Shape{ceil_div(out, 32), ceil_div(in, 32)},
                         {cb::Fill::E8m0Scales, 0, 0, 0, -9});
        break;
      case WeightFormat::Fp4Row:
        w.data = tensor(DType::I8, Shape{out, in / 2}, {cb::Fill::RandomBytes});
        w.scale = tensor(DType::F8_E8M0, Shape{out, in / 32}, {cb::Fill::E8m0Scales, 0, 0, 0, -4});
        break;
      case WeightFormat::Bf16:
        w.data = tensor(DType::BF16, Shape{out, in}, {cb::Fill::Bf16, 0, -0.05f, 0.05f});
        break;
      case WeightFormat::F32:
        w.data = tensor(DType::F32, Shape{out, in}, {cb::Fill::F32, 0, -0.05f, 0.05f});
        break;
    }
    return w;
  }
  Tensor tensor(DType dt, Shape s, cb::FillSpec f) {
    Tensor t = be_.alloc(dt, s);
    f.seed = ++seed_;
    cb::fill(be_, t, f);
    return t;
  }

 private:
  CudaBackend& be_;
  uint64_t seed_ = 100;
};

double bytes_of(const LinearWeight& w) {
  return static_cast<double>(w.data.nbytes() + (w.scale.defined() ? w.scale.nbytes() : 0));
}

// Median device µs of `op` over the repetitions, each behind the L2-evicting cover copy.
class Timer {
 public:
  Timer(CudaBackend& be, const Options& o) : be_(be), o_(o) {
    const auto cover = static_cast<int64_t>(o.cover_mb) << 20;
    cover_src_ = be.alloc(DType::U8, Shape{cover});
    cover_dst_ = be.alloc(DType::U8, Shape{cover});
    cb::fill(be, cover_src_, cb::FillSpec{cb::Fill::RandomBytes, 3});
  }
  double median_us(const std::function<void()>& op) {
    for (int64_t i = 0; i < o_.warmup; ++i) op();
    std::vector<double> us;
    for (int64_t i = 0; i < o_.reps; ++i) {
      be_.copy(cover_src_, cover_dst_);
      us.push_back(1e3 * cb::device_ms(be_, op));
    }
    return flashdesk::bench::median(us);
  }

 private:
  CudaBackend& be_;
  const Options& o_;
  Tensor cover_src_, cover_dst_;
};

class Table {
 public:
  explicit Table(double copy_bw) : copy_bw_(copy_bw) {
    std::printf("| op | shape (out x in) | format | n | µs | GB/s | of copy BW |\n");
    std::printf("| --- | --- | --- | ---: | ---: | ---: | ---: |\n");
  }
  void row(const std::string& op, const std::string& shape, const char* format, int64_t n,
           double us, double bytes) {
    const double gbs = bytes / (us * 1e-6) / 1e9;
    std::printf("| %s | %s | %s | %lld | %.1f | %.0f | %.1f%% |\n", op.c_str(), shape.c_str(),
                format, static_cast<long long>(n), us, gbs, 100.0 * gbs * 1e9 / copy_bw_);
  }

 private:
  double copy_bw_;
};

struct LinearCase {
  const char* op;
  WeightFormat format;
  int64_t out, in, groups;  // grouped (wo_a): out = groups x rows per group, in per group
  flashdesk::LinearMode mode;
};

// The decode linears of one V4.1 layer (docs/model-spec.md): attention projections, the expert
// matrices (routed experts run one row each in a step; here n rows of one expert), the gate.
const LinearCase kCases[] = {
    {"wq_a", WeightFormat::Fp8Block, 1280, 5120, 1, flashdesk::kQuantLinear},
    {"wq_b", WeightFormat::Fp8Block, 32768, 1280, 1, flashdesk::kQuantLinear},
    {"wkv", WeightFormat::Fp8Block, 512, 5120, 1, flashdesk::kQuantLinear},
    {"wo_a (8 groups)", WeightFormat::Fp8Block, 8192, 4096, 8, flashdesk::kBf16Linear},
    {"wo_b", WeightFormat::Fp8Block, 5120, 8192, 1, flashdesk::kQuantLinear},
    {"expert w1 / w3", WeightFormat::Fp4Row, 2304, 5120, 1, flashdesk::kQuantLinear},
    {"expert w2", WeightFormat::Fp4Row, 5120, 2304, 1, flashdesk::kQuantLinear},
    {"gate", WeightFormat::Bf16, 384, 5120, 1, flashdesk::kF32Linear},
};

// A linear's weight bytes (codes, then scales) as read_spans takes them.
std::vector<cb::ReadSpan> spans_of(const LinearWeight& w) {
  std::vector<cb::ReadSpan> s{{w.data.bytes(), w.data.nbytes()}};
  if (w.scale.defined()) s.push_back({w.scale.bytes(), w.scale.nbytes()});
  return s;
}

// Experts' weight spans as their decode kernels read them: every w1 and w3 (the up kernel), then
// every w2 (the down kernel).
struct ExpertSpans {
  std::vector<cb::ReadSpan> up, down;
  void add(const ExpertWeights& e) {
    for (const LinearWeight* w : {&e.w1, &e.w3})
      for (const cb::ReadSpan& s : spans_of(*w)) up.push_back(s);
    for (const cb::ReadSpan& s : spans_of(e.w2)) down.push_back(s);
  }
  std::vector<cb::ReadSpan> both() const {
    std::vector<cb::ReadSpan> all = up;
    all.insert(all.end(), down.begin(), down.end());
    return all;
  }
};

// The same bytes read by a kernel that does nothing else (bench_support.h read_spans): what a
// launch streaming them could take at best, ramp and tail included.
class ReadAlone {
 public:
  ReadAlone(CudaBackend& be, Timer& timer, Table& table)
      : be_(be), timer_(timer), table_(table), sink_(cb::read_spans_sink(be)) {}
  // One launch over all of `spans`.
  void row(const std::string& op, const std::string& shape, const char* format,
           const std::vector<cb::ReadSpan>& spans) {
    launches(op, shape, format, {spans});
  }
  // A launch a group, one after another (the layer's matrices as its kernels read them).
  void launches(const std::string& op, const std::string& shape, const char* format,
                const std::vector<std::vector<cb::ReadSpan>>& groups) {
    best_of(op, shape, format, groups, [&](int in_flight, int blocks_per_sm) {
      for (const auto& g : groups) cb::read_spans(be_, g, sink_, in_flight, blocks_per_sm);
    });
  }
  // One launch, each group's reads used only after the group before's (cb::read_phases): the
  // groups' reads streamed across their ends, each waiting for the one before as the layer's
  // operations do.
  void phases(const std::string& op, const std::string& shape, const char* format,
              const std::vector<std::vector<cb::ReadSpan>>& groups) {
    best_of(op, shape, format, groups, [&](int in_flight, int blocks_per_sm) {
      cb::read_phases(be_, groups, sink_, counters_, in_flight, blocks_per_sm);
    });
  }

 private:
  // The fastest of the grid and loads-in-flight settings of `read`.
  void best_of(const std::string& op, const std::string& shape, const char* format,
               const std::vector<std::vector<cb::ReadSpan>>& groups,
               const std::function<void(int, int)>& read) {
    double bytes = 0;
    for (const auto& g : groups)
      for (const cb::ReadSpan& s : g) bytes += static_cast<double>(s.bytes);
    double best = 0;
    std::string how;
    for (const int blocks_per_sm : {4, 8})
      for (const int in_flight : {4, 8, 16}) {
        const double us = timer_.median_us([&] { read(in_flight, blocks_per_sm); });
        if (how.empty() || us < best) {
          best = us;
          how = std::to_string(blocks_per_sm) + " blocks a multiprocessor, " +
                std::to_string(in_flight) + " loads a thread";
        }
      }
    table_.row(op + " (" + how + ")", shape, format, 0, best, bytes);
  }

  CudaBackend& be_;
  Timer& timer_;
  Table& table_;
  Tensor sink_, counters_ = cb::read_phases_counters(be_);
};

void run_linears(CudaBackend& be, const Options& o, Timer& timer, Table& table) {
  Weights mk(be);
  ReadAlone read(be, timer, table);
  for (const LinearCase& c : kCases) {
    const LinearWeight w = mk.make(c.format, c.out, c.in);
    const std::string shape = c.groups > 1 ? std::to_string(c.groups) + " x " +
                                                 std::to_string(c.out / c.groups) + " x " +
                                                 std::to_string(c.in)
                                           : std::to_string(c.out) + " x " + std::to_string(c.in);
    read.row(std::string(c.op) + ", read alone", shape, weight_format_name(c.format), spans_of(w));
    const int64_t x_cols = c.in * c.groups;
    for (int64_t n : o.rows) {
      Tensor x = mk.tensor(DType::F32, Shape{n, x_cols}, {cb::Fill::F32, 0, -2.0f, 2.0f});
      Tensor y = be.alloc(DType::F32, Shape{n, c.out});
      const double us = timer.median_us([&] {
        if (c.groups > 1)
          be.grouped_linear(x, w, c.groups, y);
        else
          be.linear(x, w, c.mode, y);
      });
      table.row(c.op, shape, weight_format_name(c.format), n, us, bytes_of(w));
    }
  }
}

// One MoE step (moe_experts) of n rows, 6 routed FP4 experts each (distinct over the rows) and
// the FP8 shared expert, on the tensor-core and on the CUDA-core kernels; bytes: the distinct
// experts' weights.
void run_moe(CudaBackend& be, Timer& timer, Table& table, int64_t n) {
  const int64_t dim = 5120, inter = 2304, E = 384, k = 6;
  Weights mk(be);
  auto expert = [&](WeightFormat f) {
    return ExpertWeights{mk.make(f, inter, dim), mk.make(f, inter, dim), mk.make(f, dim, inter)};
  };
  std::vector<ExpertWeights> pool;
  for (int64_t i = 0; i < n * k; ++i) pool.push_back(expert(WeightFormat::Fp4Row));
  const ExpertWeights shared = expert(WeightFormat::Fp8Block);
  std::vector<const ExpertWeights*> experts(static_cast<size_t>(E), nullptr);
  std::vector<int32_t> ids(static_cast<size_t>(n * k));
  double bytes = 0;
  for (int64_t i = 0; i < n * k; ++i) {
    const int64_t id = (i * 61) % E;  // n * k <= 48 distinct ids
    experts[static_cast<size_t>(id)] = &pool[static_cast<size_t>(i)];
    ids[static_cast<size_t>(i)] = static_cast<int32_t>(id);
  }
  for (const ExpertWeights* e : experts)
    if (e) bytes += bytes_of(e->w1) + bytes_of(e->w3) + bytes_of(e->w2);
  bytes += bytes_of(shared.w1) + bytes_of(shared.w3) + bytes_of(shared.w2);
  Tensor id = be.alloc(DType::I32, Shape{n, k});
  be.write(id, ids.data(), ids.size() * sizeof(int32_t));
  Tensor wt = mk.tensor(DType::F32, Shape{n, k}, {cb::Fill::F32, 0, 0.1f, 1.5f});
  Tensor x = mk.tensor(DType::F32, Shape{n, dim}, {cb::Fill::F32, 0, -2.0f, 2.0f});
  Tensor y = be.alloc(DType::F32, Shape{n, dim});
  if (n == 1) {
    // The step's weights read alone: in one launch, and as its two kernels read them (the slots'
    // w1 and w3, then their w2).
    ExpertSpans spans;
    for (const ExpertWeights* e : experts)
      if (e) spans.add(*e);
    spans.add(shared);
    ReadAlone read(be, timer, table);
    read.row("MoE step weights, read alone", "one launch", "FP4/FP8", spans.both());
    read.launches("MoE step weights, read alone", "up, then down", "FP4/FP8",
                  {spans.up, spans.down});
    read.phases("MoE step weights, read alone", "one launch, down after up", "FP4/FP8",
                {spans.up, spans.down});
  }
  // The default kernels (the tensor cores), then the CUDA-core ones as the baseline of this run.
  for (const bool tensor_cores : {true, false}) {
    be.set_decode_experts_tensor_cores(tensor_cores);
    const double us =
        timer.median_us([&] { be.moe_experts(x, id, wt, experts, &shared, 7.0f, y); });
    table.row(tensor_cores ? "MoE step (6 routed FP4 + shared FP8)" : "MoE step, CUDA-core kernels",
              "7 x 3 x 2304 x 5120", "FP4/FP8", n, us, bytes);
  }
  be.set_decode_experts_tensor_cores(true);
}

// A window-only layer's weights at one row (the dense linears of kCases and one step's six routed
// FP4 experts and the FP8 shared one) read alone: in one launch, and a launch an operation in
// the step's order (wkv, wq_a, wq_b, wo_a, wo_b, the gate, the experts' w1 and w3, their w2). The
// difference is what stopping the reads at each operation's end costs a plain read.
void run_layer_read(CudaBackend& be, Timer& timer, Table& table) {
  Weights mk(be);
  std::vector<LinearWeight> dense;
  for (const LinearCase& c : kCases)
    if (c.format != WeightFormat::Fp4Row) dense.push_back(mk.make(c.format, c.out, c.in));
  std::vector<ExpertWeights> experts;
  for (int i = 0; i < 7; ++i) {
    const WeightFormat f = i < 6 ? WeightFormat::Fp4Row : WeightFormat::Fp8Block;
    experts.push_back({mk.make(f, 2304, 5120), mk.make(f, 2304, 5120), mk.make(f, 5120, 2304)});
  }
  std::vector<std::vector<cb::ReadSpan>> ops;
  for (const size_t i : {2, 0, 1, 3, 4, 5}) ops.push_back(spans_of(dense[i]));  // kCases' order
  ExpertSpans spans;
  for (const ExpertWeights& e : experts) spans.add(e);
  ops.push_back(spans.up);
  ops.push_back(spans.down);
  std::vector<cb::ReadSpan> all;
  for (const auto& op : ops) all.insert(all.end(), op.begin(), op.end());
  ReadAlone read(be, timer, table);
  read.row("a window-only layer's weights, read alone", "one launch", "all", all);
  read.launches("a window-only layer's weights, read alone", "a launch an operation (8)", "all",
                ops);
  read.phases("a window-only layer's weights, read alone", "one launch, each op after the last",
              "all", ops);
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
  return out;
}

Options parse(int argc, char** argv) {
  cxxopts::Options options("cuda_gemv_bench",
                           "Decode GEMVs and one MoE step against the device copy bandwidth");
  options.add_options()("rows", "activation rows per GEMV (1..8)",
                        cxxopts::value<std::string>()->default_value("1,2,4,8"))(
      "reps", "timed repetitions (median)", cxxopts::value<int64_t>()->default_value("20"))(
      "warmup", "untimed calls first", cxxopts::value<int64_t>()->default_value("3"))(
      "device", "GPU index", cxxopts::value<int>()->default_value("0"))(
      "copy-mb", "bytes of the copy-bandwidth measurement (MiB)",
      cxxopts::value<int64_t>()->default_value("2048"))(
      "cover-mb", "bytes of the L2-evicting copy before each repetition (MiB)",
      cxxopts::value<int64_t>()->default_value("128"))("no-moe", "skip the MoE steps");
  const auto args = flashdesk::bench::parse_options(options, argc, argv);
  Options o;
  o.rows = parse_list(args["rows"].as<std::string>());
  o.reps = std::max<int64_t>(1, args["reps"].as<int64_t>());
  o.warmup = std::max<int64_t>(0, args["warmup"].as<int64_t>());
  o.device = args["device"].as<int>();
  o.copy_mb = args["copy-mb"].as<int64_t>();
  o.cover_mb = std::max<int64_t>(1, args["cover-mb"].as<int64_t>());
  o.moe = args.count("no-moe") == 0;
  return o;
}

}  // namespace

static int run_bench(const Options& o) {
  CudaBackend be(o.device);
  const double copy_bw = cb::copy_bandwidth(be, static_cast<size_t>(o.copy_mb) << 20);
  std::printf("device: %s; median of %lld repetitions after %lld warm-up calls\n",
              flashdesk::describe(be.device()).c_str(), static_cast<long long>(o.reps),
              static_cast<long long>(o.warmup));
  std::printf("device copy measured now: %.0f GB/s (read + write)\n\n", copy_bw / 1e9);
  Timer timer(be, o);
  Table table(copy_bw);
  run_linears(be, o, timer, table);
  if (o.moe)
    for (int64_t n : {1, 8}) run_moe(be, timer, table, n);
  if (o.moe) run_layer_read(be, timer, table);
  return 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows survive a timeout that stops the run
  const Options o = parse(argc, argv);
  for (int64_t n : o.rows)
    if (n < 1 || n > 8) {
      std::fprintf(stderr, "cuda_gemv_bench: --rows takes 1..8 (the GEMV path)\n");
      return 2;
    }
  return flashdesk::bench::run_on_gpu("cuda_gemv_bench", [&] { return run_bench(o); });
}
