// A decode step's indexer selection on the CUDA backend at the V4.1 shapes (one query, 32 index
// heads of 128, top-512 entries and the 2,048 candidate blocks of 8), five forms taking turns in
// one run: torch's heap steps by one thread with the heap in place (the reference), by a warp with
// the heap in shared memory, by one thread on that copy (CudaBackend::set_heap_steps), each with
// the top-k and the candidate blocks one after the other on one block, and the last two with them
// on two blocks at once (CudaBackend::set_select_split; one thread's so is the default); and the
// scoring alone (indexer_scores: two entries a lane group from 262,144 entries,
// CudaBackend::set_score_pairs_from), so the selection's share of the op shows. Random FP4 keys
// and queries, generated on the device; rows of 4,096 to 1,048,576 entries (a 4K to 1M context at
// ratio 1). From 32,768 entries torch heap-selects the top 512 (64 k <= the row), and at
// 1,048,576 the candidate blocks too (2,048 of 131,072); below about 18,000 entries the row is
// selected in shared memory on one block (the two-block forms run the one-block code) and below
// 32,768 no heap steps are taken. Each row's tie at the 512th score is counted from its scores
// read back, with how many of the equals the top 512 take: where it takes them all (as on the
// random 16,385-entry row) no torch steps run, so that row times the plain path; a layer's rows
// (--rows) leave some out. All forms' ids (top-k and candidates) must be equal.
//
// With --rows, score rows from files instead (cuda_layer_bench --dump-scores writes a layer's):
// the selection alone on each (CudaBackend::indexer_select_rows, no scores), with torch's
// partitions by the block, over runs (set_select_runs), by the block with the short ranges on
// one warp (set_select_warp_tail) and with that and the count pass's stop masks kept
// (set_select_stop_masks), so a layer's rows and the random ones can be compared.
//
//   cuda_select_bench [--entries 4096,16385,32767,65536,262144,1048576] [--reps N] [--device N]
//                     [--seed N] [--dump-scores DIR (each row's scores, raw float32:
//                     DIR/select_ENTRIES.f32)]
//                     [--rows FILE[:c],... (raw float32 score rows, all visible; ":c": with the
//                     candidate blocks too; replaces --entries)]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_timing.h"
#include "bench/cuda_bench_main.h"
#include "bench/score_ties.h"
#include "engine/ops/cuda/bench_support.h"
#include "engine/ops/cuda/cuda_devices.h"

namespace {

using flashdesk::CudaBackend;
using flashdesk::DType;
using flashdesk::EntryCache;
using flashdesk::IndexerArgs;
using flashdesk::Shape;
using flashdesk::Tensor;
namespace cb = flashdesk::cuda_bench;

constexpr int64_t kHeads = 32, kHeadDim = 128, kTopK = 512, kBlock = 8, kCandidates = 2048;

struct Options {
  std::vector<int64_t> entries;
  int64_t reps = 20;
  int device = 0;
  uint64_t seed = 1;
  std::string dump_scores;        // where the score rows go ("": nowhere)
  std::vector<std::string> rows;  // score row files (":c": with candidates)
};

Options parse(int argc, char** argv) {
  cxxopts::Options options("cuda_select_bench",
                           "A decode step's indexer selection: five forms of torch's heap steps");
  options.add_options()("entries", "row widths (entries a query sees)",
                        cxxopts::value<std::vector<int64_t>>()->default_value(
                            "4096,16385,32767,65536,262144,1048576"))(
      "reps", "timed repetitions of each form (median)",
      cxxopts::value<int64_t>()->default_value("20"))("device", "GPU index",
                                                      cxxopts::value<int>()->default_value("0"))(
      "seed", "random contents", cxxopts::value<uint64_t>()->default_value("1"))(
      "dump-scores", "a folder for each row's scores (raw float32)",
      cxxopts::value<std::string>()->default_value(""))(
      "rows", "score row files (raw float32; FILE:c with candidate blocks)",
      cxxopts::value<std::vector<std::string>>()->default_value(""));
  const auto args = flashdesk::bench::parse_options(options, argc, argv);
  Options o;
  o.entries = args["entries"].as<std::vector<int64_t>>();
  o.reps = std::max<int64_t>(1, args["reps"].as<int64_t>());
  o.device = args["device"].as<int>();
  o.seed = args["seed"].as<uint64_t>();
  o.dump_scores = args["dump-scores"].as<std::string>();
  for (const std::string& r : args["rows"].as<std::vector<std::string>>())
    if (!r.empty()) o.rows.push_back(r);
  return o;
}

void run_row(CudaBackend& be, const Options& o, int64_t entries) {
  const uint64_t seed = o.seed + static_cast<uint64_t>(entries);
  Tensor q = be.alloc(DType::F32, Shape{1, kHeads, kHeadDim});
  cb::fill(be, q, {cb::Fill::Bf16InF32, seed, -1.0f, 1.0f});
  Tensor w = be.alloc(DType::F32, Shape{1, kHeads});
  cb::fill(be, w, {cb::Fill::F32, seed + 1, -0.5f, 1.0f});
  Tensor keys = be.alloc(DType::U8, Shape{entries, kHeadDim / 2 + kHeadDim / 32});
  cb::fill(be, keys, {cb::Fill::KeyRows, seed + 2, 0, 0, -3, kHeadDim});
  const std::vector<int64_t> visible{entries};
  IndexerArgs a;
  a.q = &q;
  a.weights = &w;
  a.n_visible = visible;
  a.keys = EntryCache{&keys, entries};
  a.block_size = kBlock;
  const int64_t blocks = (entries + kBlock - 1) / kBlock;
  Tensor topk = be.alloc(DType::I32, Shape{1, kTopK});
  Tensor cand = be.alloc(DType::I32, Shape{1, std::min(kCandidates, blocks)});

  const Tensor scores = be.indexer_scores(a);
  std::vector<float> row(static_cast<size_t>(scores.numel()));
  be.read(scores, row.data(), row.size() * sizeof(float));
  const flashdesk::bench::KthTie tie = flashdesk::bench::kth_tie(row, kTopK);
  if (!o.dump_scores.empty())
    flashdesk::bench::write_score_row(o.dump_scores + "/select_" + std::to_string(entries) + ".f32",
                                      row);

  // The forms: who takes the heap steps, and whether the top-k and the candidates run on two
  // blocks. Form 0 is the reference; form 4 the default.
  using flashdesk::cuda::HeapSteps;
  struct Form {
    HeapSteps steps;
    bool split;
  };
  constexpr Form kForms[] = {{HeapSteps::InPlace, false},
                             {HeapSteps::Warp, false},
                             {HeapSteps::Thread, false},
                             {HeapSteps::Warp, true},
                             {HeapSteps::Thread, true}};
  constexpr int kN = static_cast<int>(std::size(kForms));
  const HeapSteps steps_before = be.heap_steps();
  const bool split_before = be.select_split();
  std::vector<double> ms[kN], score_ms;
  std::vector<int32_t> ids[kN];
  for (int64_t rep = -1; rep < o.reps; ++rep) {  // rep -1: untimed warm-up
    for (int f = 0; f < kN; ++f) {
      be.set_select_runs(false);
      be.set_heap_steps(kForms[f].steps);
      be.set_select_split(kForms[f].split);
      const double t = cb::device_ms(be, [&] { be.indexer_select(a, topk, &cand); });
      if (rep >= 0) ms[f].push_back(t);
      if (rep == 0) {  // the top-k, then the candidates
        ids[f].resize(static_cast<size_t>(topk.numel() + cand.numel()));
        be.read(topk, ids[f].data(), static_cast<size_t>(topk.numel()) * sizeof(int32_t));
        be.read(cand, ids[f].data() + topk.numel(),
                static_cast<size_t>(cand.numel()) * sizeof(int32_t));
      }
    }
    const double s = cb::device_ms(be, [&] { (void)be.indexer_scores(a); });
    if (rep >= 0) score_ms.push_back(s);
  }
  be.set_heap_steps(steps_before);
  be.set_select_split(split_before);
  const double score_us = flashdesk::bench::median(score_ms) * 1e3;
  double op_us[kN], select_us[kN];
  bool same = true;
  for (int f = 0; f < kN; ++f) {
    op_us[f] = flashdesk::bench::median(ms[f]) * 1e3;
    select_us[f] = std::max(op_us[f] - score_us, 1e-3);
    same = same && ids[f] == ids[0];
  }
  std::printf("| %lld | %s | %.1f |", static_cast<long long>(entries), tie.str().c_str(), score_us);
  for (int f = 0; f < kN; ++f) std::printf(" %.1f |", op_us[f]);
  for (int f = 1; f < kN; ++f) std::printf(" %.2fx |", select_us[0] / select_us[f]);
  std::printf(" %s |\n", same ? "yes" : "NO");
}

// A score row file's floats; empty (and a message) where it cannot be read or is not a whole
// number of floats.
std::vector<float> read_row(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> row;
  if (!in.bad() && !bytes.empty() && bytes.size() % sizeof(float) == 0) {
    row.resize(bytes.size() / sizeof(float));
    std::memcpy(row.data(), bytes.data(), bytes.size());
  } else {
    std::fprintf(stderr, "cuda_select_bench: %s is not a row of float32 scores (%zu bytes)\n",
                 path.c_str(), bytes.size());
  }
  return row;
}

// The forms of torch's partitions --rows times, in turn (CudaBackend's settings).
struct FileForm {
  bool runs, warp_tail, stop_masks;
  const char* what;
};
constexpr FileForm kFileForms[] = {
    {false, false, false, "the block's partitions"},
    {true, false, false, "over runs"},
    {false, true, false, "short ranges on a warp"},
    {false, true, true, "short ranges on a warp, stop masks kept (default)"},
};

// The selection alone on a given row in each form of torch's partitions (kFileForms).
void run_file_row(CudaBackend& be, const Options& o, const std::string& spec) {
  const bool with_candidates = spec.size() > 2 && spec.compare(spec.size() - 2, 2, ":c") == 0;
  const std::string path = with_candidates ? spec.substr(0, spec.size() - 2) : spec;
  const std::vector<float> row = read_row(path);
  if (row.empty()) return;
  const auto width = static_cast<int64_t>(row.size());
  Tensor scores = be.alloc(DType::F32, Shape{1, width});
  be.write(scores, row.data(), row.size() * sizeof(float));
  const int64_t k = std::min(kTopK, width), blocks = (width + kBlock - 1) / kBlock;
  Tensor topk = be.alloc(DType::I32, Shape{1, k});
  Tensor cand = be.alloc(DType::I32, Shape{1, std::min(kCandidates, blocks)});
  const std::vector<int64_t> visible{width};
  const bool runs_before = be.select_runs(), tail_before = be.select_warp_tail(),
             masks_before = be.select_stop_masks();
  constexpr int kN = std::size(kFileForms);
  std::vector<double> ms[kN];
  std::vector<int32_t> ids[kN];
  for (int64_t rep = -1; rep < o.reps; ++rep) {  // rep -1: untimed warm-up
    for (int f = 0; f < kN; ++f) {
      be.set_select_runs(kFileForms[f].runs);
      be.set_select_warp_tail(kFileForms[f].warp_tail);
      be.set_select_stop_masks(kFileForms[f].stop_masks);
      const double t = cb::device_ms(be, [&] {
        be.indexer_select_rows(scores, visible, kBlock, topk, with_candidates ? &cand : nullptr);
      });
      if (rep >= 0) ms[f].push_back(t);
      if (rep == 0) {
        ids[f].resize(static_cast<size_t>(topk.numel()));
        be.read(topk, ids[f].data(), ids[f].size() * sizeof(int32_t));
      }
    }
  }
  be.set_select_runs(runs_before);
  be.set_select_warp_tail(tail_before);
  be.set_select_stop_masks(masks_before);
  std::printf("| %s | %lld | %s | %s |", path.c_str(), static_cast<long long>(width),
              with_candidates ? "yes" : "no", flashdesk::bench::kth_tie(row, k).str().c_str());
  bool same = true;
  for (int f = 0; f < kN; ++f) {
    std::printf(" %.1f |", flashdesk::bench::median(ms[f]) * 1e3);
    same = same && ids[f] == ids[0];
  }
  std::printf(" %s |\n", same ? "yes" : "NO");
}

}  // namespace

static int run_bench(const Options& o) {
  CudaBackend be(o.device);
  if (!o.rows.empty()) {
    std::printf(
        "device: %s; the selection alone on given score rows, median of %lld "
        "repetitions, the forms taking turns\n\n| row | entries | candidates | equal to "
        "the k-th (of them taken) | selection µs:",
        flashdesk::describe(be.device()).c_str(), static_cast<long long>(o.reps));
    for (const FileForm& f : kFileForms) std::printf(" %s |", f.what);
    std::printf(" same ids |\n| --- | ---: | --- | ---: |");
    for (size_t f = 0; f < std::size(kFileForms); ++f) std::printf(" ---: |");
    std::printf(" --- |\n");
    for (const std::string& r : o.rows) run_file_row(be, o, r);
    return 0;
  }
  std::printf("device: %s; median of %lld repetitions, the forms taking turns\n\n",
              flashdesk::describe(be.device()).c_str(), static_cast<long long>(o.reps));
  std::printf(
      "| entries | equal to the 512th (of them taken) | scores µs | op µs: one thread in place | a "
      "warp | one "
      "thread | a warp, two blocks | one thread, two blocks (default) | selection speed-up: a "
      "warp | one thread | a warp, two blocks | one thread, two blocks | same ids |\n"
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- "
      "|\n");
  for (const int64_t e : o.entries) run_row(be, o, e);
  return 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows survive a timeout that stops the run
  const Options o = parse(argc, argv);
  for (const int64_t e : o.entries)
    if (e < kTopK) {
      std::fprintf(stderr, "cuda_select_bench: --entries takes rows of at least %lld\n",
                   static_cast<long long>(kTopK));
      return 2;
    }
  return flashdesk::bench::run_on_gpu("cuda_select_bench", [&] { return run_bench(o); });
}
