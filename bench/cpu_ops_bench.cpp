// Benchmark of the optimised CPU backend's hot ops against the reference backend, per ISA path,
// at the demo model's shapes (flash-tiny) and at full-size single layers, with the memcpy
// bandwidth measured in the same run as the roofline of the decode-like (n = 1) linears.
//
// Usage: cpu_ops_bench [--threads N] [--quick]   (prints one table; medians of timed reps)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_timing.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

using flashdesk::bench::median;

using flashdesk::bench::Clock;

double seconds_of(const std::function<void()>& fn) {
  const auto a = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - a).count();
}

// Median seconds per variant: reps interleave the variants (v0, v1, ..., v0, v1, ...) so that
// load from other processes on a shared machine hits every variant alike; 3..25 reps, about
// `budget` seconds per variant. fn(variant, rep).
std::vector<double> interleaved_medians(int variants, const std::function<void(int, int)>& fn,
                                        double budget) {
  std::vector<std::vector<double>> t(static_cast<size_t>(variants));
  double total = 0;
  for (int v = 0; v < variants; ++v) fn(v, 0);  // warm-up
  for (int rep = 1; rep <= 25 && (rep <= 3 || total < budget * variants); ++rep)
    for (int v = 0; v < variants; ++v) {
      const double s = seconds_of([&] { fn(v, rep); });
      t[static_cast<size_t>(v)].push_back(s);
      total += s;
    }
  std::vector<double> out;
  for (auto& times : t) out.push_back(median(times));
  return out;
}

// memcpy bandwidth (bytes copied per second) over buffers far larger than the caches.
double memcpy_gbps() {
  const size_t bytes = size_t{256} << 20;
  std::vector<uint8_t> a(bytes, 1), b(bytes, 2);
  const double s = interleaved_medians(
      1, [&](int, int rep) { std::memcpy(b.data(), a.data() + (rep & 1), bytes - 1); }, 1.0)[0];
  return static_cast<double>(bytes) / s / 1e9;
}

class Rng {
 public:
  uint32_t next() { return s_ = s_ * 1664525u + 1013904223u; }
  float symmetric(float amp) {
    return (2.0f * static_cast<float>(next() >> 8) / static_cast<float>(1u << 24) - 1.0f) * amp;
  }

 private:
  uint32_t s_ = 12345;
};

// The backends compared: reference, then the optimised one per supported ISA.
struct Backends {
  std::unique_ptr<CpuReferenceBackend> ref;
  std::vector<std::unique_ptr<CpuOptimizedBackend>> opt;
  explicit Backends(int threads) : ref(std::make_unique<CpuReferenceBackend>(threads)) {
    for (CpuIsa isa : supported_cpu_isas())
      opt.push_back(std::make_unique<CpuOptimizedBackend>(threads, isa));
  }
};

Tensor random_bytes(Backend& be, DType dt, Shape shape, Rng& rng) {
  Tensor t = be.alloc(dt, shape);
  uint8_t* p = t.bytes();
  for (size_t i = 0; i < t.nbytes(); ++i) {
    p[i] = static_cast<uint8_t>(rng.next() >> 24);
    if ((dt == DType::F8_E4M3) && (p[i] & 0x7F) == 0x7F) p[i] = 0x7E;
  }
  return t;
}

Tensor random_f32(Backend& be, Shape shape, Rng& rng, float amp) {
  Tensor t = be.alloc(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = round_bf16(rng.symmetric(amp));
  return t;
}

LinearWeight random_weight(Backend& be, WeightFormat f, int64_t out, int64_t in, Rng& rng) {
  LinearWeight w;
  w.format = f;
  w.out = out;
  w.in = in;
  w.name = "bench";
  auto scales = [&](Shape s) {
    Tensor t = be.alloc(DType::F8_E8M0, s);
    for (size_t i = 0; i < t.nbytes(); ++i)
      t.bytes()[i] = static_cast<uint8_t>(116 + rng.next() % 8);
    return t;
  };
  switch (f) {
    case WeightFormat::Fp8Block:
      w.data = random_bytes(be, DType::F8_E4M3, Shape{out, in}, rng);
      w.scale = scales(Shape{(out + 31) / 32, (in + 31) / 32});
      break;
    case WeightFormat::Fp4Row:
      w.data = random_bytes(be, DType::I8, Shape{out, in / 2}, rng);
      w.scale = scales(Shape{out, in / 32});
      break;
    case WeightFormat::Bf16: {
      w.data = be.alloc(DType::BF16, Shape{out, in});
      auto* p = reinterpret_cast<uint16_t*>(w.data.bytes());
      for (int64_t i = 0; i < out * in; ++i) p[i] = f32_to_bf16(rng.symmetric(0.1f));
      break;
    }
    case WeightFormat::F32:
      w.data = random_f32(be, Shape{out, in}, rng, 0.1f);
      break;
  }
  return w;
}

size_t weight_bytes(const LinearWeight& w) {
  return w.data.nbytes() + (w.scale.defined() ? w.scale.nbytes() : 0);
}

// One table row: times per backend (reference first), optional weight bytes per call.
struct Row {
  Row(std::string op_name, std::string shape_text, double weight_bytes = 0)
      : op(std::move(op_name)), shape(std::move(shape_text)), bytes(weight_bytes) {}
  std::string op, shape;
  std::vector<double> ms;
  double bytes = 0;  // weight bytes read per call (decode-like linears), 0: not a GEMV
};

class Bench {
 public:
  Bench(int threads, bool quick) : be_(threads), quick_(quick) {}

  void run() {
    gbps_ = memcpy_gbps();
    const bool q = quick_;
    // Demo-size (flash-tiny: D 320, q_lora 192, 4 heads x 128, experts 320, vocab 8192).
    linear("demo", WeightFormat::Fp8Block, 1, 512, 192, 64);
    linear("demo", WeightFormat::Fp4Row, 1, 320, 320, 64);
    linear("demo", WeightFormat::Bf16, 1, 8192, 320, 4, kF32Linear);
    linear("demo", WeightFormat::Fp8Block, q ? 128 : 512, 512, 192, 1);
    linear("demo", WeightFormat::Fp4Row, q ? 128 : 512, 320, 320, 1);
    // Full-size single layers (deepseek-v4.1-flash.json: expert w1 [2304, 5120] FP4, wo_b
    // [5120, 8192] FP8); decode rotates over copies larger than the L3 cache.
    linear("full", WeightFormat::Fp4Row, 1, 2304, 5120, 8);
    linear("full", WeightFormat::Fp8Block, 1, 5120, 8192, 2);
    linear("full", WeightFormat::Fp4Row, q ? 16 : 64, 2304, 5120, 1);
    linear("full", WeightFormat::Fp8Block, q ? 16 : 64, 5120, 8192, 1);
    moe("demo", 1, 320, 320, 12, 2);
    moe("demo", q ? 64 : 256, 320, 320, 12, 2);
    attention("demo", 1, 4, 128, 128, 512, 64);
    attention("demo", q ? 64 : 256, 4, 128, 128, 512, 64);
    attention("full", 1, 64, 512, 128, 4096, 512);
    indexer("demo", 1, 4, 128, 4096, 64);
    indexer("demo", q ? 64 : 256, 4, 128, 4096, 64);
    indexer("full", 1, 32, 128, 16384, 512);
    mixes("demo", 1, 320);
    mixes("demo", q ? 64 : 256, 320);
    mixes("full", 1, 5120);
    norm_rope("demo", q ? 64 : 256, 320, 4, 128, 64);
    norm_rope("full", 16, 5120, 64, 512, 64);
    print();
  }

 private:
  // Times op(backend, call) on every backend. `call` counts every call of every backend, so ops
  // that rotate over weight copies give each call a different copy than the call before it (with
  // the repetition number instead, each backend read the copy the previous one had just brought
  // into the L3 cache).
  void time(Row row, const std::function<void(Backend&, int)>& op, double budget = 0.4) {
    const int variants = 1 + static_cast<int>(be_.opt.size());
    for (double sec : interleaved_medians(
             variants,
             [&](int v, int rep) {
               op(v == 0 ? static_cast<Backend&>(*be_.ref) : *be_.opt[static_cast<size_t>(v - 1)],
                  rep * variants + v);
             },
             budget))
      row.ms.push_back(1e3 * sec);
    rows_.push_back(row);
    std::fprintf(stderr, "  %s %s done\n", row.op.c_str(), row.shape.c_str());
  }

  void linear(const char* size, WeightFormat f, int64_t n, int64_t out, int64_t in, int copies,
              LinearMode mode = kQuantLinear) {
    std::vector<LinearWeight> ws;
    for (int c = 0; c < copies; ++c) ws.push_back(random_weight(*be_.ref, f, out, in, rng_));
    Tensor x = random_f32(*be_.ref, Shape{n, in}, rng_, 2.0f),
           y = be_.ref->alloc(DType::F32, Shape{n, out});
    Row row(std::string("linear ") + weight_format_name(f) + " " + size,
            "n=" + std::to_string(n) + " [" + std::to_string(out) + "," + std::to_string(in) + "]",
            n == 1 ? static_cast<double>(weight_bytes(ws[0])) : 0.0);
    time(row, [&](Backend& be, int rep) {
      be.linear(x, ws[static_cast<size_t>(rep) % ws.size()], mode, y);
    });
  }

  void moe(const char* size, int64_t n, int64_t d, int64_t inter, int64_t E, int64_t k) {
    std::vector<ExpertWeights> ex;
    for (int64_t e = 0; e < E; ++e)
      ex.push_back({random_weight(*be_.ref, WeightFormat::Fp4Row, inter, d, rng_),
                    random_weight(*be_.ref, WeightFormat::Fp4Row, inter, d, rng_),
                    random_weight(*be_.ref, WeightFormat::Fp4Row, d, inter, rng_)});
    ExpertWeights shared{random_weight(*be_.ref, WeightFormat::Fp8Block, inter, d, rng_),
                         random_weight(*be_.ref, WeightFormat::Fp8Block, inter, d, rng_),
                         random_weight(*be_.ref, WeightFormat::Fp8Block, d, inter, rng_)};
    std::vector<const ExpertWeights*> ptrs;
    for (auto& e : ex) ptrs.push_back(&e);
    Tensor ids = be_.ref->alloc(DType::I32, Shape{n, k}),
           w = be_.ref->alloc(DType::F32, Shape{n, k});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) {
        ids.data<int32_t>()[i * k + j] = static_cast<int32_t>((i * 7 + j * 5) % E);
        w.data<float>()[i * k + j] = 0.5f;
      }
    Tensor x = random_f32(*be_.ref, Shape{n, d}, rng_, 2.0f),
           y = be_.ref->alloc(DType::F32, Shape{n, d});
    time({std::string("moe_experts ") + size,
          "n=" + std::to_string(n) + " E=" + std::to_string(E) + " k=" + std::to_string(k) +
              "+1 [" + std::to_string(inter) + "," + std::to_string(d) + "]"},
         [&](Backend& be, int) { be.moe_experts(x, ids, w, ptrs, &shared, 10.0f, y); });
  }

  Tensor cache(KvFormat f, int64_t rows, int64_t dim) {
    Tensor t = be_.ref->alloc(DType::U8, Shape{rows, kv_row_bytes(f, dim)});
    be_.ref->quantize_rows(f, random_f32(*be_.ref, Shape{rows, dim}, rng_, 2.0f), t, 0);
    return t;
  }

  // n queries at the end of a context with E compressed entries, W-slot ring, k top-k entries.
  void attention(const char* size, int64_t n, int64_t heads, int64_t d, int64_t W, int64_t E,
                 int64_t k) {
    const int64_t first = 8 * E;  // ratio-8-like context
    Tensor ring = cache(KvFormat::Fp8Window, W, d), step = cache(KvFormat::Fp8Window, n, d);
    Tensor entries = cache(KvFormat::Fp4Entry, E, d);
    std::vector<int64_t> ring_pos(static_cast<size_t>(W)), pos(static_cast<size_t>(n));
    for (int64_t p = first - W; p < first; ++p) ring_pos[static_cast<size_t>(p % W)] = p;
    for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = first + i;
    Tensor topk = be_.ref->alloc(DType::I32, Shape{n, k});
    for (int64_t i = 0; i < n * k; ++i)
      topk.data<int32_t>()[i] = static_cast<int32_t>(rng_.next() % E);
    Tensor q = random_f32(*be_.ref, Shape{n, heads, d}, rng_, 1.0f),
           sink = random_f32(*be_.ref, Shape{heads}, rng_, 1.0f);
    Tensor out = be_.ref->alloc(DType::F32, Shape{n, heads, d});
    AttentionArgs a;
    a.q = &q;
    a.positions = pos;
    a.window = WindowKv{&ring, ring_pos, &step, first, W};
    a.compressed = EntryCache{&entries, E};
    a.topk = &topk;
    a.sink = &sink;
    a.softmax_scale = 0.05f;
    time({std::string("sparse_attention ") + size,
          "n=" + std::to_string(n) + " H=" + std::to_string(heads) + " D=" + std::to_string(d) +
              " W=" + std::to_string(W) + " k=" + std::to_string(k)},
         [&](Backend& be, int) { be.sparse_attention(a, out); });
  }

  void indexer(const char* size, int64_t n, int64_t heads, int64_t d, int64_t E, int64_t k) {
    Tensor keys = cache(KvFormat::Fp4Key, E, d);
    Tensor q = random_f32(*be_.ref, Shape{n, heads, d}, rng_, 1.0f),
           w = random_f32(*be_.ref, Shape{n, heads}, rng_, 1.0f);
    be_.ref->fake_quant_fp4_e8m0(q, 32);
    std::vector<int64_t> visible(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) visible[static_cast<size_t>(t)] = E - n + t + 1;
    Tensor topk = be_.ref->alloc(DType::I32, Shape{n, k});
    IndexerArgs a;
    a.q = &q;
    a.weights = &w;
    a.n_visible = visible;
    a.keys = EntryCache{&keys, E};
    time({std::string("indexer_select ") + size,
          "n=" + std::to_string(n) + " H=" + std::to_string(heads) + " d=" + std::to_string(d) +
              " E=" + std::to_string(E) + " k=" + std::to_string(k)},
         [&](Backend& be, int) { be.indexer_select(a, topk, nullptr); });
  }

  void mixes(const char* size, int64_t n, int64_t d) {
    const int64_t flat = 4 * d;
    HcParams p{random_f32(*be_.ref, Shape{24, flat}, rng_, 0.05f),
               random_f32(*be_.ref, Shape{24}, rng_, 1.0f),
               random_f32(*be_.ref, Shape{3}, rng_, 1.0f)};
    Tensor X = random_f32(*be_.ref, Shape{n, 4, d}, rng_, 2.0f);
    Tensor pre = be_.ref->alloc(DType::F32, Shape{n, 4}),
           post = be_.ref->alloc(DType::F32, Shape{n, 4});
    Tensor comb = be_.ref->alloc(DType::F32, Shape{n, 4, 4});
    time({std::string("hc_mixes ") + size,
          "n=" + std::to_string(n) + " hc*D=" + std::to_string(flat)},
         [&](Backend& be, int) { be.hc_mixes(X, p, HcSettings{}, pre, post, comb); });
  }

  void norm_rope(const char* size, int64_t n, int64_t d, int64_t heads, int64_t head_dim,
                 int64_t rope_dim) {
    Tensor x = random_f32(*be_.ref, Shape{n, d}, rng_, 2.0f),
           y = be_.ref->alloc(DType::F32, Shape{n, d});
    Tensor w = random_f32(*be_.ref, Shape{d}, rng_, 1.0f);
    time({std::string("rms_norm ") + size, "n=" + std::to_string(n) + " d=" + std::to_string(d)},
         [&](Backend& be, int) { be.rms_norm(x, &w, 1e-6f, y); });
    Tensor q = random_f32(*be_.ref, Shape{n, heads, head_dim}, rng_, 2.0f);
    std::vector<float> inv(static_cast<size_t>(rope_dim / 2), 0.01f);
    std::vector<int64_t> pos(static_cast<size_t>(n), 1000);
    time({std::string("rope ") + size, "n=" + std::to_string(n) + " H=" + std::to_string(heads) +
                                           " rope=" + std::to_string(rope_dim)},
         [&](Backend& be, int) { be.rope(q, head_dim, pos, inv, false); });
  }

  void print() const {
    std::printf("memcpy bandwidth: %.2f GB/s (bytes copied per second, 256 MiB buffers)\n", gbps_);
    std::printf("threads: %d   times: median ms per call   speedup: reference / optimised\n\n",
                be_.ref->pool().size());
    std::printf("| %-26s | %-34s | %9s |", "op", "shape", "ref ms");
    for (auto& o : be_.opt)
      std::printf(" %9s |", (std::string(cpu_isa_name(o->isa())) + " ms").c_str());
    for (auto& o : be_.opt)
      std::printf(" %7s |", (std::string("x ") + std::string(cpu_isa_name(o->isa()))).c_str());
    std::printf(" %8s | %8s |\n", "GB/s", "roofline");
    std::printf("|%s|%s|%s|", std::string(28, '-').c_str(), std::string(36, '-').c_str(),
                std::string(11, '-').c_str());
    for (size_t i = 0; i < 2 * be_.opt.size(); ++i)
      std::printf("%s|", std::string(i < be_.opt.size() ? 11 : 9, '-').c_str());
    std::printf("%s|%s|\n", std::string(10, '-').c_str(), std::string(10, '-').c_str());
    for (const Row& r : rows_) {
      std::printf("| %-26s | %-34s | %9.3f |", r.op.c_str(), r.shape.c_str(), r.ms[0]);
      for (size_t i = 1; i < r.ms.size(); ++i) std::printf(" %9.3f |", r.ms[i]);
      for (size_t i = 1; i < r.ms.size(); ++i) std::printf(" %7.1f |", r.ms[0] / r.ms[i]);
      if (r.bytes > 0) {
        const double gbs = r.bytes / (r.ms.back() * 1e-3) / 1e9;
        std::printf(" %8.2f | %7.0f%% |\n", gbs, 100.0 * gbs / gbps_);
      } else {
        std::printf(" %8s | %8s |\n", "", "");
      }
    }
    std::printf(
        "\nGB/s and roofline: weight bytes (codes + scales) read per call by the last ISA column, "
        "against the memcpy bandwidth; demo-size weights stay in the L2/L3 caches, full-size "
        "decode rotates over copies larger than the L3 cache.\n");
  }

  Backends be_;
  bool quick_;
  Rng rng_;
  double gbps_ = 0;
  std::vector<Row> rows_;
};

}  // namespace
}  // namespace flashdesk

int main(int argc, char** argv) {
  int threads = 0;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--quick]\n", argv[0]);
      return 2;
    }
  }
  flashdesk::Bench(threads, quick).run();
  return 0;
}
