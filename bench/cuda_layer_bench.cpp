// Decode (batch 1, 8, 32) and prefill time of one V4.1 layer of each role at full shapes on the
// CUDA backend (bench/cuda_layer.h: weights and caches random on the device), against ceilings
// measured in the same run: achieved bytes/s over the device-to-device copy bandwidth, prefill
// FLOP/s over cuBLAS's BF16 GEMM rate; kernels per layer; an extrapolated decode ms/token for
// the config's main layers. Prints markdown tables.
//
//   cuda_layer_bench [--config FILE] [--context N] [--batches 1,8,32] [--iters N]
//                    [--prefill N (0: none)] [--device N] [--copy-mb N] [--gemm-n N]
//                    [--max-roles N (the first N roles only, no extrapolation: for a profiler)]
//                    [--role N (role N alone, counted from 0 in the tables' order; for a profiler)]
//                    [--graph 0|1 (decode steps as step graphs too: replayed where they match a
//                     recorded step, every step captured, and the last one launched again with
//                     no host work; default 1)]
//                    [--stack K (0: none; decode steps of K layers, the role's layer issued K
//                     times: as launches, as one step graph, as graphs of a part per P
//                     layers for each P of --parts (where the host's replay overlaps the
//                     device), and as the default's trial chose (FLASHDESK_CUDA_GRAPH=auto))]
//                    [--parts 1,4 (the part sizes --stack measures)]
//                    [--queued 0|1 (the decode steps again with the stream held until the host
//                     has issued them all: the device's time with no wait on the host, and the
//                     host's time a step; default 1)]
//                    [--host-trace 0|1 (the host's time between the launches of one decode
//                     step of each role and batch, and its calls that may wait for the device;
//                     default 0)]
//                    [--timeline 0|1 (one batch-1 decode step of each role traced by CUPTI:
//                     every kernel's start and end, cuda_timeline.h, as launches (also from a
//                     held, full launch queue) and, with --graph 1, as a replayed step graph;
//                     and one more prefill of each role, its idle gaps; default 0)]
//                    [--probe-reps N (each indexer layer's op timed again alone on a batch-1
//                     step's own arguments, N repetitions: its selection apart from what runs
//                     beside it; default 10, 0: only the tie)]
//                    [--weights-only 0|1 (each role's batch-1 step with its weight-streaming
//                     kernels alone, SyntheticLayer::decode_weights_only: what the kernels
//                     between them cost; default 1)]
//                    [--dump-scores DIR (each indexer layer's batch-1 score rows, one file an
//                     input set, raw little-endian float32: DIR/layerL_inputK.f32)]
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/bench_timing.h"
#include "bench/cuda_layer.h"
#include "bench/cuda_timeline.h"
#include "bench/score_ties.h"
#include "engine/ops/cuda/bench_support.h"
#include "engine/ops/step_graph_choice.h"

namespace {

using flashdesk::LayerRole;
using flashdesk::TextConfig;
namespace cb = flashdesk::cuda_bench;

struct Options {
  std::string config;
  int64_t context = 16384, iters = 20, prefill = 8192;
  int64_t copy_mb = 2048, gemm_n = 8192;  // sizes of the ceiling measurements
  std::vector<int64_t> batches = {1, 8, 32};
  int64_t role = -1;      // -1: every role (or the first max_roles); else that one alone
  int64_t max_roles = 0;  // 0: every distinct role; else the first N (a profiler's short run)
  int device = 0;
  bool host_experts = false;  // routed experts in host memory, computed on the CPU (hybrid)
  bool graph = true;          // also time decode steps as step graphs
  bool timeline = false;      // trace one batch-1 decode step of each role
  bool queued = true;         // decode steps also timed from a full launch queue
  bool host_trace = false;    // the host's time between the launches of one batch-1 step
  int64_t probe_reps = 10;    // the indexer op timed alone on a step's own arguments
  bool weights_only = true;   // batch 1 also as its weight-streaming kernels alone
  std::string dump_scores;    // where the indexer layers' score rows go ("": nowhere)
  int64_t stack = 0;          // decode steps of this many layers (0: none)
  std::vector<int64_t> parts = {1, 4};  // layers a step graph's part holds, for --stack
};

// Option `option`'s value as a whole number, or an error that names both (std::stoll's own said
// only "stoll", and read a quoted '' from a shell as a bad number).
int64_t whole_number(const std::string& option, const std::string& text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || at != end)
    throw std::invalid_argument(option + ": '" + text + "' is not a whole number");
  return v;
}

// A comma-separated list of whole numbers (empty: none).
std::vector<int64_t> parse_list(const std::string& option, const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(whole_number(option, item));
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  o.config =
      (std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/deepseek-v4.1-flash.json").string();
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
    const std::string v = argv[i + 1];
    if (a == "--config")
      o.config = v;
    else if (a == "--context")
      o.context = whole_number(a, v);
    else if (a == "--iters")
      o.iters = whole_number(a, v);
    else if (a == "--prefill")
      o.prefill = whole_number(a, v);
    else if (a == "--batches")
      o.batches = parse_list(a, v);
    else if (a == "--device")
      o.device = static_cast<int>(whole_number(a, v));
    else if (a == "--max-roles")
      o.max_roles = whole_number(a, v);
    else if (a == "--role")
      o.role = whole_number(a, v);
    else if (a == "--copy-mb")
      o.copy_mb = whole_number(a, v);
    else if (a == "--gemm-n")
      o.gemm_n = whole_number(a, v);
    else if (a == "--host-experts")
      o.host_experts = v == "1";
    else if (a == "--graph")
      o.graph = v == "1";
    else if (a == "--timeline")
      o.timeline = v == "1";
    else if (a == "--queued")
      o.queued = v == "1";
    else if (a == "--host-trace")
      o.host_trace = v == "1";
    else if (a == "--probe-reps")
      o.probe_reps = whole_number(a, v);
    else if (a == "--weights-only")
      o.weights_only = v == "1";
    else if (a == "--dump-scores")
      o.dump_scores = v;
    else if (a == "--stack")
      o.stack = whole_number(a, v);
    else if (a == "--parts")
      o.parts = parse_list(a, v);
    else
      throw std::invalid_argument("unknown option " + a);
  }
  return o;
}

// What makes two layers cost the same: compress ratio, role, candidate building / restriction.
using Signature = std::tuple<int64_t, flashdesk::AttnRole, bool, bool>;
Signature signature(const LayerRole& r) {
  return {r.compress_ratio, r.role, r.builds_candidates,
          r.candidate_source >= 0 && !r.builds_candidates};
}

std::string role_label(const LayerRole& r) {
  std::string s = std::string(flashdesk::attn_role_name(r.role));
  if (r.builds_candidates) s += "+cand";
  if (r.candidate_source >= 0 && !r.builds_candidates && r.role == flashdesk::AttnRole::Reindex)
    s += " (restricted)";
  if (r.compress_ratio > 0) s += " r" + std::to_string(r.compress_ratio);
  return s + " (layer " + std::to_string(r.layer) + ")";
}

}  // namespace

static int run_bench(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_layer_bench: %s\n", e.what());
    return 2;
  }
  const flashdesk::ModelConfig cfg = flashdesk::load_model_config(o.config);
  const TextConfig& t = cfg.text;
  const std::vector<LayerRole> roles = flashdesk::derive_layer_roles(t);
  flashdesk::CudaBackend be(o.device);
  std::printf("device: %s (%s); config %s; context %lld; %lld timed steps each\n", be.name().data(),
              flashdesk::describe(be.device()).c_str(), cfg.name.c_str(),
              static_cast<long long>(o.context), static_cast<long long>(o.iters));
  const double copy_bw = cb::copy_bandwidth(be, static_cast<size_t>(o.copy_mb) << 20);
  const double gemm_flops = cb::bf16_gemm_flops(be, o.gemm_n);
  std::printf(
      "ceilings measured now: device copy %.0f GB/s (read + write), BF16 GEMM %.0f TFLOP/s\n\n",
      copy_bw / 1e9, gemm_flops / 1e12);

  // One layer per distinct signature (Engram layers: their attention role is measured without
  // Engram, which adds a table gather and one linear).
  std::map<Signature, LayerRole> reps;
  std::map<Signature, int64_t> counts;
  for (const LayerRole& r : roles) {
    counts[signature(r)] += 1;
    if (!reps.count(signature(r)) && !r.engram) reps[signature(r)] = r;
    if (!reps.count(signature(r))) reps[signature(r)] = r;
  }
  if (o.max_roles > 0)
    while (static_cast<int64_t>(reps.size()) > o.max_roles) reps.erase(std::prev(reps.end()));
  if (o.role >= 0) {
    if (o.role >= static_cast<int64_t>(reps.size()))
      throw std::invalid_argument("--role past the " + std::to_string(reps.size()) + " roles");
    const auto keep = *std::next(reps.begin(), o.role);
    reps = {keep};
  }
  // Rows are printed as they are measured: a run stopped by its time limit keeps what it has.
  std::map<std::pair<Signature, int64_t>, double> per_layer_us;
  std::printf(
      "## Decode, one layer (device time per step; wall includes the host's launches)%s\n\n",
      o.host_experts ? ", routed experts in host memory computed on the CPU (hybrid; MB "
                       "read: the device's)"
                     : "");
  if (o.graph)
    std::printf(
        "Launches: each kernel launched by the host; graph: the step as a step graph "
        "(engine/ops/cuda/step_graph.h), replayed where its ops are the recorded ones (else "
        "captured; the host's matching, capture and update included in wall; a step begins once "
        "the last one's graphs ran, as the step graphs keep one staging buffer); captured wall: "
        "every step captured and updated (no replay); relaunch: the last step's graph launched "
        "again with no host work at all. GB/s and the share of copy BW from the larger of device "
        "and wall time of the launches (the engine's default path).\n\n");
  std::printf(
      "| role | batch | device µs | wall µs | graph device µs | graph wall µs | captured wall µs "
      "| relaunch µs | kernels | MB read | GB/s | of copy BW |\n");
  std::printf(
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  // Device and wall µs per step of `iters` steps issued by `step(i)`.
  std::vector<std::pair<std::string, std::vector<flashdesk::bench::KernelSpan>>> timelines;
  struct QueuedRow {
    std::string label;
    int64_t batch;
    double device_us, queued_us, host_us;
    bool held;  // the host issued everything before the hold ended
  };
  std::vector<QueuedRow> queued_rows;
  struct WeightsOnlyRow {
    std::string label;
    double step_us, weights_us, bytes;
  };
  std::vector<WeightsOnlyRow> weights_only_rows;
  struct TieRow {
    std::string label;
    // One per input set: scores equal to the k-th best, and the op and its scores alone.
    std::vector<flashdesk::bench::SyntheticLayer::IndexProbe> probes;
  };
  std::vector<TieRow> tie_rows;
  struct HostTrace {
    std::string label;
    int64_t batch;
    std::vector<cb::HostLaunch> launches;
    int64_t start_ns, end_ns;
  };
  std::vector<HostTrace> host_traces;
  std::string no_trace;
  const bool timeline = o.timeline && flashdesk::bench::kernel_trace_available(&no_trace);
  if (o.timeline && !timeline) std::printf("(no kernel timeline: %s)\n\n", no_trace.c_str());
  auto time_steps = [&](const std::function<void(int64_t)>& step) {
    be.synchronize();
    const auto t0 = flashdesk::bench::Clock::now();
    const double ms = cb::device_ms(be, [&] {
      for (int64_t i = 0; i < o.iters; ++i) step(i);
    });
    const double wall_us = 1e6 * flashdesk::bench::seconds_since(t0) / static_cast<double>(o.iters);
    return std::pair<double, double>{1e3 * ms / static_cast<double>(o.iters), wall_us};
  };
  for (const auto& [sig, role] : reps) {
    for (int64_t batch : o.batches) {
      flashdesk::bench::SyntheticLayer layer(be, t, role, batch, o.context, 1000 + role.layer,
                                             o.host_experts);
      for (int i = 0; i < 3; ++i) layer.decode(i);  // warm-up: buffers cached, heuristics set
      be.synchronize();
      const uint64_t k0 = cb::kernels_launched();
      layer.decode(3);
      const uint64_t kernels = cb::kernels_launched() - k0;
      const auto [device_us, wall_us] =
          time_steps([&](int64_t i) { layer.decode(static_cast<int>(i)); });
      double g_device = 0, g_wall = 0, captured_wall = 0, relaunch = 0;
      if (o.graph) {
        be.set_step_graphs(true);
        auto graph_step = [&](int64_t i) {
          be.step_graph_begin(batch);
          layer.decode(static_cast<int>(i));
          be.step_graph_end();
        };
        be.set_step_replay(false);
        for (int i = 0; i < 4; ++i) graph_step(i);  // each input set's graph made once
        captured_wall = time_steps(graph_step).second;
        be.set_step_replay(true);
        for (int i = 0; i < 4; ++i) graph_step(i);  // recorded for replays
        std::tie(g_device, g_wall) = time_steps(graph_step);
        if (!o.host_experts) relaunch = time_steps([&](int64_t) { be.relaunch_last_step(); }).first;
        if (timeline && batch == 1) {
          // A replayed step graph has no host launches between its kernels (CUPTI's cost a
          // launch stretched the traced launches' step from 238 to 421 µs, fourteenth session),
          // so its spans show the device's own gaps and overlaps.
          flashdesk::bench::kernel_trace_begin();
          graph_step(0);
          timelines.emplace_back(role_label(role) + ", a replayed step graph",
                                 flashdesk::bench::kernel_trace_end());
        }
        be.set_step_graphs(false);
      }
      // Hybrid: the device's bytes only (the routed experts are read by the CPU).
      double bytes = 0;
      for (int k = 0; k < 4; ++k) {
        const flashdesk::bench::StepBytes b = layer.decode_bytes(k);
        bytes += (o.host_experts ? b.total() - b.experts : b.total()) / 4.0;
      }
      const double step_us = std::max(device_us, wall_us);
      const double gbs = bytes / (step_us * 1e-6) / 1e9;
      std::printf(
          "| %s | %lld | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %llu | %.1f | %.0f | %.1f%% |\n",
          role_label(role).c_str(), static_cast<long long>(batch), device_us, wall_us, g_device,
          g_wall, captured_wall, relaunch, static_cast<unsigned long long>(kernels), bytes / 1e6,
          gbs, 100.0 * gbs * 1e9 / copy_bw);
      per_layer_us[{sig, batch}] = step_us;
      if (batch == 1 && o.weights_only && !o.host_experts) {
        for (int i = 0; i < 4; ++i) layer.decode_weights_only(i);  // routed, warmed up
        double wbytes = 0;
        for (int k = 0; k < 4; ++k) wbytes += layer.weights_only_bytes(k) / 4.0;
        const double weights_us =
            time_steps([&](int64_t i) { layer.decode_weights_only(static_cast<int>(i)); }).first;
        weights_only_rows.push_back({role_label(role), device_us, weights_us, wbytes});
      }
      if (batch == 1 && role.compress_ratio > 0) {  // the indexer's tie on each input set
        TieRow tr{role_label(role), {}};
        for (int k = 0; k < 4; ++k) {
          tr.probes.push_back(layer.index_probe(k, o.probe_reps));
          if (!o.dump_scores.empty() && tr.probes.back().tie.equal > 0)
            flashdesk::bench::write_score_row(o.dump_scores + "/layer" +
                                                  std::to_string(role.layer) + "_input" +
                                                  std::to_string(k) + ".f32",
                                              tr.probes.back().row);
          tr.probes.back().row = {};
        }
        if (tr.probes.front().tie.equal > 0) tie_rows.push_back(std::move(tr));
      }
      if (o.queued) {
        // Held long enough for the host to issue every step first (about 0.3-0.5 ms a step).
        const double hold_ms = 2.0 + 1.5 * static_cast<double>(o.iters);
        be.synchronize();
        const cb::QueuedTime q = cb::queued_device_ms(
            be,
            [&] {
              for (int64_t i = 0; i < o.iters; ++i) layer.decode(static_cast<int>(i));
            },
            hold_ms);
        const double per = 1e3 / static_cast<double>(o.iters);
        queued_rows.push_back({role_label(role), batch, device_us, q.device_ms * per,
                               q.host_ms * per, q.host_ms < hold_ms});
      }
      if (o.host_trace) {
        be.synchronize();
        cb::host_launch_trace_begin();
        const auto t0 = std::chrono::steady_clock::now();
        layer.decode(0);
        const auto t1 = std::chrono::steady_clock::now();
        host_traces.push_back(
            {role_label(role), batch, cb::host_launch_trace_end(),
             std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count(),
             std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count()});
        be.synchronize();
      }
      if (timeline && batch == 1) {
        flashdesk::bench::kernel_trace_begin();
        layer.decode(0);
        timelines.emplace_back(role_label(role), flashdesk::bench::kernel_trace_end());
        // The same step issued behind a held stream: CUPTI's cost a launch no longer spaces the
        // kernels out, so the spans show the launches' own overlaps (a beside lane's included).
        be.synchronize();
        flashdesk::bench::kernel_trace_begin();
        cb::queued_device_ms(
            be, [&] { layer.decode(0); }, 20.0);
        timelines.emplace_back(role_label(role) + ", launched from a full queue (after the hold)",
                               flashdesk::bench::kernel_trace_end());
      }
    }
  }
  if (!tie_rows.empty()) {
    // The selection's cost depends on this tie (torch's steps run over the row where only some
    // of the equals are taken). The op alone (its scores and selection on the step's own
    // arguments, nothing beside it) tells the selection's cost on these rows apart from what
    // shares the device with it in a step.
    std::printf(
        "\n## The indexer's tie at the k-th best score, and its op alone (batch 1, the decode "
        "steps' four input sets; µs: device medians of %lld runs of the op on a step's own "
        "arguments)\n\n| role | scores equal to the k-th (of them taken) | op alone µs | scores "
        "alone µs | "
        "selection µs |\n| --- | --- | --- | --- | --- |\n",
        static_cast<long long>(o.probe_reps));
    for (const TieRow& r : tie_rows) {
      std::string ties, op, sc, sel;
      char buf[32];
      for (const auto& p : r.probes) {
        const char* sep = ties.empty() ? "" : " / ";
        ties += sep + p.tie.str();
        std::snprintf(buf, sizeof buf, "%s%.1f", sep, p.op_us);
        op += buf;
        std::snprintf(buf, sizeof buf, "%s%.1f", sep, p.scores_us);
        sc += buf;
        std::snprintf(buf, sizeof buf, "%s%.1f", sep, p.op_us - p.scores_us);
        sel += buf;
      }
      std::printf("| %s | %s | %s | %s | %s |\n", r.label.c_str(), ties.c_str(), op.c_str(),
                  sc.c_str(), sel.c_str());
    }
  }
  if (!weights_only_rows.empty()) {
    std::printf(
        "\n## The weight-streaming kernels alone (batch 1: wkv beside wq_a and wq_b, wo_a, wo_b, "
        "the gate, the experts on each input set's routing; the Full and Reindex layers' "
        "compressor and indexer linears left out)\n\nthe rest: the step's device time minus "
        "theirs, what the kernels between them (mixes, norms, RoPE, quantisations, attention, "
        "indexer, router, boundaries) add; of copy BW: their bytes over their own time.\n\n"
        "| role | step device µs | weight kernels µs | the rest µs | their MB | GB/s | of copy BW "
        "|\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const WeightsOnlyRow& r : weights_only_rows) {
      const double gbs = r.bytes / (r.weights_us * 1e-6) / 1e9;
      std::printf("| %s | %.0f | %.0f | %.0f | %.1f | %.0f | %.1f%% |\n", r.label.c_str(),
                  r.step_us, r.weights_us, r.step_us - r.weights_us, r.bytes / 1e6, gbs,
                  100.0 * gbs * 1e9 / copy_bw);
    }
  }
  if (!queued_rows.empty()) {
    std::printf(
        "\n## Decode from a full launch queue (the stream held until the host has issued every "
        "step)\n\nqueued device: the device's time a step with no wait on the host; host: the "
        "host's time to issue a step; the launches' device time above minus the queued one is "
        "what waiting on the host cost.\n\n| role | batch | device µs | queued device µs | host µs "
        "| waited on the host µs |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (const QueuedRow& r : queued_rows)
      std::printf("| %s | %lld | %.0f | %.0f%s | %.0f | %.0f |\n", r.label.c_str(),
                  static_cast<long long>(r.batch), r.device_us, r.queued_us,
                  r.held ? "" : " (queue ran dry)", r.host_us, r.device_us - r.queued_us);
  }
  for (const HostTrace& h : host_traces) {
    // Launches the host reached 10 µs or more after the one before (or that are not launches:
    // cudaMalloc, cudaFree, reads, which may wait for the device); the rest summed.
    std::printf("\n## The host's time before launches, one decode step, %s, batch %lld\n\n",
                h.label.c_str(), static_cast<long long>(h.batch));
    std::printf("| # | launch or host call | host µs before it |\n| ---: | --- | ---: |\n");
    int64_t prev = h.start_ns, small_ns = 0, small = 0;
    for (size_t i = 0; i < h.launches.size(); ++i) {
      const int64_t gap = h.launches[i].ns - prev;
      const std::string name = h.launches[i].name;
      const bool host_call = name == "cudaMalloc" || name == "cudaFree" ||
                             name.rfind("read", 0) == 0 || name.rfind("beside lane", 0) == 0;
      if (gap >= 10000 || host_call) {
        std::printf("| %zu | %s | %.1f |\n", i, name.c_str(), static_cast<double>(gap) / 1e3);
      } else {
        small_ns += gap;
        ++small;
      }
      prev = h.launches[i].ns;
    }
    std::printf("| | %lld more, each under 10 µs | %.1f |\n| | (after the last) | %.1f |\n\n",
                static_cast<long long>(small), static_cast<double>(small_ns) / 1e3,
                static_cast<double>(h.end_ns - prev) / 1e3);
    std::printf("step: %.1f µs of host time, %zu entries\n",
                static_cast<double>(h.end_ns - h.start_ns) / 1e3, h.launches.size());
  }
  for (const auto& [label, spans] : timelines) {
    std::printf("\n## Kernel timeline of one decode step (CUPTI), %s, batch 1\n\n", label.c_str());
    flashdesk::bench::print_kernel_trace(spans);
  }
  if (o.stack > 0) {
    // A step of several layers: the host issues (or replays) layer j + 1 while the device runs
    // layer j. One graph for the step starts the device only once the host has matched every op;
    // parts let the device start on the first while the host matches the next.
    std::printf(
        "\n## Decode steps of %lld layers (each role's layer issued %lld times a step; wall µs a "
        "step, device µs in parentheses)\n\n| role | batch | launches | one graph |",
        static_cast<long long>(o.stack), static_cast<long long>(o.stack));
    for (int64_t p : o.parts) std::printf(" parts of %lld |", static_cast<long long>(p));
    std::printf(" auto (chose) |\n| --- | ---: | ---: | ---: |");
    for (size_t i = 0; i <= o.parts.size(); ++i) std::printf(" ---: |");
    std::printf("\n");
    for (const auto& [sig, role] : reps) {
      for (int64_t batch : o.batches) {
        flashdesk::bench::SyntheticLayer layer(be, t, role, batch, o.context, 3000 + role.layer,
                                               o.host_experts);
        auto step = [&](int64_t i) {
          be.step_graph_begin(batch);  // nothing where graphs are off
          for (int64_t j = 0; j < o.stack; ++j) {
            layer.decode(static_cast<int>(i));
            be.step_graph_layer_done();
          }
          be.step_graph_end();
        };
        auto timed = [&] {
          for (int i = 0; i < 4; ++i) step(i);  // warm-up; with graphs, each input set recorded
          return time_steps(step);
        };
        be.set_step_graphs(false);
        const auto [l_dev, l_wall] = timed();
        std::printf("| %s | %lld | %.0f (%.0f) |", role_label(role).c_str(),
                    static_cast<long long>(batch), l_wall, l_dev);
        be.set_step_graphs(true);
        be.set_step_replay(true);
        be.set_step_graph_part_layers(0);
        const auto [g_dev, g_wall] = timed();
        std::printf(" %.0f (%.0f) |", g_wall, g_dev);
        for (int64_t p : o.parts) {
          be.set_step_graph_part_layers(static_cast<int>(p));
          const auto [p_dev, p_wall] = timed();
          std::printf(" %.0f (%.0f) |", p_wall, p_dev);
        }
        // The default (FLASHDESK_CUDA_GRAPH=auto, parts of one layer): at batch 1, its trial's
        // steps, each waited for as a decode step waits for its logits, then the way it chose;
        // steps of more rows run as launches.
        be.set_step_graphs_auto();
        be.set_step_graph_part_layers(1);
        const bool tried = flashdesk::StepGraphChoice::tried(batch);
        for (int64_t i = 0; tried && !be.step_graph_choice()->decided(); ++i) {
          step(i);
          be.synchronize();
        }
        const auto [a_dev, a_wall] = timed();
        const bool graphs =
            be.step_graph_choice()->way(batch) == flashdesk::StepGraphChoice::Way::Graphs;
        std::printf(" %.0f (%.0f), %s |\n", a_wall, a_dev, graphs ? "graphs" : "launches");
        be.set_step_graph_part_layers(0);
        be.set_step_graphs(false);
      }
    }
  }
  if (o.graph || o.stack > 0) {
    const flashdesk::cuda::StepGraphCounts& c = be.step_graph_counts();
    std::printf(
        "\nStep graphs: %llu launched, %llu instantiated, %llu updated in place, %llu replayed, "
        "%llu replays stopped (the last at %s).\n",
        static_cast<unsigned long long>(c.launches),
        static_cast<unsigned long long>(c.instantiations),
        static_cast<unsigned long long>(c.updates), static_cast<unsigned long long>(c.replays),
        static_cast<unsigned long long>(c.replay_stops), c.last_stop);
  }
  if (o.max_roles == 0 && o.role < 0) {
    std::printf(
        "\n## Extrapolated decode of the %lld main layers (max of device and wall time per "
        "layer; embedding, final norm and head not included)\n\n",
        static_cast<long long>(t.num_hidden_layers));
    std::printf("| batch | ms / step | tokens/s |\n| ---: | ---: | ---: |\n");
    for (int64_t batch : o.batches) {
      double us = 0;
      for (const auto& [sig, n] : counts) us += static_cast<double>(n) * per_layer_us[{sig, batch}];
      std::printf("| %lld | %.2f | %.0f |\n", static_cast<long long>(batch), us / 1e3,
                  static_cast<double>(batch) / (us * 1e-6));
    }
  }
  if (o.prefill > 0) {
    std::printf("\n## Prefill of %lld tokens, one layer\n\n", static_cast<long long>(o.prefill));
    std::printf("| role | ms | TFLOP/s | of BF16 GEMM rate |\n| --- | ---: | ---: | ---: |\n");
    std::vector<std::pair<std::string, std::vector<flashdesk::bench::KernelSpan>>> prefill_gaps;
    for (const auto& [sig, role] : reps) {
      flashdesk::bench::SyntheticLayer layer(be, t, role, 1, o.context, 2000 + role.layer);
      layer.prefill(o.prefill);  // warm-up
      be.synchronize();
      const double ms = cb::device_ms(be, [&] { layer.prefill(o.prefill); });
      const double rate = layer.prefill_flops(o.prefill) / (ms * 1e-3);
      std::printf("| %s | %.1f | %.1f | %.1f%% |\n", role_label(role).c_str(), ms, rate / 1e12,
                  100.0 * rate / gemm_flops);
      if (timeline) {  // one more run traced: where the device idled
        flashdesk::bench::kernel_trace_begin();
        layer.prefill(o.prefill);
        prefill_gaps.emplace_back(role_label(role), flashdesk::bench::kernel_trace_end());
      }
    }
    for (const auto& [label, spans] : prefill_gaps) {
      std::printf("\n## Idle gaps of one traced prefill (CUPTI), %s\n\n", label.c_str());
      flashdesk::bench::print_idle_gaps(spans, 12);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a timeout that stops the run
  try {
    return run_bench(argc, argv);
  } catch (const std::exception& e) {  // no GPU, out of memory, a CUDA error: say which
    std::fprintf(stderr, "cuda_layer_bench: %s\n", e.what());
    return 1;
  }
}
