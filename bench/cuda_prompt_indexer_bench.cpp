// A prompt's indexer on the CUDA backend at the V4.1 shapes (32 index heads of 128, top-512
// entries, the candidate blocks of 8): the rows of an n-token prefill at compression ratio m
// (V4.1's Full layers: 1 for layer 20, 2 for layers 2, 8 and 14), query t seeing (t + 1) / m
// entries (an 8K-token prompt at ratio 1: 8,192 rows of 8,192 entries, its first 511 rows seeing
// fewer than 512). In one run, taking turns: the scores on the tensor cores with each CTA decoding
// its key tiles and with the keys decoded once for the call (CudaBackend::set_index_keys_decoded),
// and the selection (the op less the scores) on blocks of 1024, 512, 256 and 128 threads
// (set_prefill_select_threads). Ratios are against the first form of each: the per-tile keys and
// 1024 threads, the defaults until the twenty-ninth session's measurements (decoded keys and 128
// threads since).
// The scores of both key forms and the ids of every block size must be equal.
//
//   cuda_prompt_indexer_bench [--tokens 2048,8192] [--ratios 1,2] [--reps N] [--device N]
//                             [--seed N]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
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
using flashdesk::EntryCache;
using flashdesk::IndexerArgs;
using flashdesk::Shape;
using flashdesk::Tensor;
namespace cb = flashdesk::cuda_bench;

constexpr int64_t kHeads = 32, kHeadDim = 128, kTopK = 512, kBlock = 8, kCandidates = 2048;
constexpr int kThreads[] = {1024, 512, 256, 128};
constexpr int kThreadForms = static_cast<int>(std::size(kThreads));

struct Options {
  std::vector<int64_t> tokens, ratios;
  int64_t reps = 10;
  int device = 0;
  uint64_t seed = 1;
};

Options parse(int argc, char** argv) {
  cxxopts::Options options("cuda_prompt_indexer_bench",
                           "A prompt's indexer: key decoding once or per tile, selection block "
                           "sizes");
  options.add_options()("tokens", "prompt lengths (rows)",
                        cxxopts::value<std::vector<int64_t>>()->default_value("2048,8192"))(
      "ratios", "compression ratios (a prompt's entries: its tokens / ratio)",
      cxxopts::value<std::vector<int64_t>>()->default_value("1,2"))(
      "reps", "timed repetitions of each form (median)",
      cxxopts::value<int64_t>()->default_value("10"))("device", "GPU index",
                                                      cxxopts::value<int>()->default_value("0"))(
      "seed", "random contents", cxxopts::value<uint64_t>()->default_value("1"));
  const auto args = flashdesk::bench::parse_options(options, argc, argv);
  Options o;
  o.tokens = args["tokens"].as<std::vector<int64_t>>();
  o.ratios = args["ratios"].as<std::vector<int64_t>>();
  o.reps = std::max<int64_t>(1, args["reps"].as<int64_t>());
  o.device = args["device"].as<int>();
  o.seed = args["seed"].as<uint64_t>();
  return o;
}

template <class T>
std::vector<T> read_back(CudaBackend& be, const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  be.read(t, v.data(), v.size() * sizeof(T));
  return v;
}

void run_prompt(CudaBackend& be, const Options& o, int64_t tokens, int64_t ratio) {
  const uint64_t seed = o.seed + static_cast<uint64_t>(tokens);
  const int64_t entries = tokens / ratio;
  Tensor q = be.alloc(DType::F32, Shape{tokens, kHeads, kHeadDim});
  cb::fill(be, q, {cb::Fill::Bf16InF32, seed, -1.0f, 1.0f});
  be.fake_quant_fp4_e8m0(q, 32);  // the model's index queries: FP4 values, so sums are exact
  Tensor w = be.alloc(DType::F32, Shape{tokens, kHeads});
  cb::fill(be, w, {cb::Fill::F32, seed + 1, -0.5f, 1.0f});
  Tensor keys = be.alloc(DType::U8, Shape{entries, kHeadDim / 2 + kHeadDim / 32});
  cb::fill(be, keys, {cb::Fill::KeyRows, seed + 2, 0, 0, -3, kHeadDim});
  std::vector<int64_t> visible(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) visible[static_cast<size_t>(t)] = (t + 1) / ratio;
  IndexerArgs a;
  a.q = &q;
  a.weights = &w;
  a.n_visible = visible;
  a.keys = EntryCache{&keys, entries};
  a.block_size = kBlock;
  const int64_t blocks = (entries + kBlock - 1) / kBlock;
  Tensor topk = be.alloc(DType::I32, Shape{tokens, kTopK});
  Tensor cand = be.alloc(DType::I32, Shape{tokens, std::min(kCandidates, blocks)});

  const bool keys_before = be.index_keys_decoded();
  const int threads_before = be.prefill_select_threads();
  std::vector<double> score_ms[2], op_ms[kThreadForms];
  std::vector<float> scores[2];
  std::vector<int32_t> ids[kThreadForms];
  for (int64_t rep = -1; rep < o.reps; ++rep) {  // rep -1: untimed warm-up
    for (int f = 0; f < 2; ++f) {
      be.set_index_keys_decoded(f == 1);
      Tensor s;
      const double t = cb::device_ms(be, [&] { s = be.indexer_scores(a); });
      if (rep >= 0) score_ms[f].push_back(t);
      if (rep == 0) scores[f] = read_back<float>(be, s);
    }
    be.set_index_keys_decoded(keys_before);
    for (int f = 0; f < kThreadForms; ++f) {
      be.set_prefill_select_threads(kThreads[f]);
      const double t = cb::device_ms(be, [&] { be.indexer_select(a, topk, &cand); });
      if (rep >= 0) op_ms[f].push_back(t);
      if (rep == 0) {  // the top-k, then the candidates
        ids[f] = read_back<int32_t>(be, topk);
        const std::vector<int32_t> c = read_back<int32_t>(be, cand);
        ids[f].insert(ids[f].end(), c.begin(), c.end());
      }
    }
    be.set_prefill_select_threads(threads_before);
  }
  using flashdesk::bench::median;
  // The selection is the op less the scores of the default key form (the op scores that way).
  const double per_tile_us = median(score_ms[0]) * 1e3, decoded_us = median(score_ms[1]) * 1e3;
  const double base_score_us = keys_before ? decoded_us : per_tile_us;
  const bool same_scores =
      scores[0].size() == scores[1].size() &&
      std::memcmp(scores[0].data(), scores[1].data(), scores[0].size() * sizeof(float)) == 0;
  double select_us[kThreadForms];
  bool same_ids = true;
  for (int f = 0; f < kThreadForms; ++f) {
    select_us[f] = std::max(median(op_ms[f]) * 1e3 - base_score_us, 1e-3);
    same_ids = same_ids && ids[f] == ids[0];
  }
  std::printf("| %lld | %lld | %lld | %.1f | %.1f | %.2fx | %s |", static_cast<long long>(tokens),
              static_cast<long long>(ratio), static_cast<long long>(entries), per_tile_us,
              decoded_us, per_tile_us / decoded_us, same_scores ? "yes" : "NO");
  for (int f = 0; f < kThreadForms; ++f) std::printf(" %.1f |", select_us[f]);
  for (int f = 1; f < kThreadForms; ++f) std::printf(" %.2fx |", select_us[0] / select_us[f]);
  std::printf(" %s |\n", same_ids ? "yes" : "NO");
}

}  // namespace

static int run_bench(const Options& o) {
  CudaBackend be(o.device);
  std::printf("device: %s; median of %lld repetitions, the forms taking turns\n\n",
              flashdesk::describe(be.device()).c_str(), static_cast<long long>(o.reps));
  std::printf(
      "| tokens | ratio | entries | scores µs: keys a tile at a time | keys decoded once | "
      "speed-up | same scores | selection µs: 1024 threads | 512 | 256 | 128 | speed-up: 512 | "
      "256 | 128 | same ids |\n"
      "| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: "
      "| ---: | --- |\n");
  for (const int64_t r : o.ratios)
    for (const int64_t t : o.tokens) run_prompt(be, o, t, r);
  return 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows survive a timeout that stops the run
  const Options o = parse(argc, argv);
  for (const int64_t r : o.ratios)
    if (r < 1) {
      std::fprintf(stderr, "cuda_prompt_indexer_bench: --ratios takes ratios of at least 1\n");
      return 2;
    }
  for (const int64_t t : o.tokens)  // a prefill-sized call, with entries at every ratio
    for (const int64_t r : o.ratios)
      if (t < 64 || t / r < 64) {
        std::fprintf(stderr,
                     "cuda_prompt_indexer_bench: --tokens takes prompts of at least 64 rows and "
                     "64 entries (%lld at ratio %lld)\n",
                     static_cast<long long>(t), static_cast<long long>(r));
        return 2;
      }
  return flashdesk::bench::run_on_gpu("cuda_prompt_indexer_bench", [&] { return run_bench(o); });
}
