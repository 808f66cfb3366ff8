// The indexer on the CUDA backend against a scalar host model of docs/numerics.md's definition
// (d_h = bf16(q_h . k), r_h = bf16(relu(d_h) * w_h), score = bf16(sum_h r_h in head order) over a
// row of select_width entries; the k best as torch.topk chooses them (engine/util/torch_topk.h),
// ascending, entries not yet visible published as -1; candidate blocks by block maximum with the
// newest block forced). The ids must be exactly the model's, also where scores tie: rows built
// from a few distinct keys tie at almost every selection threshold.
#include <cstdlib>
#include <string>

#include "engine/ops/cpu/kernels.h"
#include "engine/util/quant.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/select_forms.h"

namespace flashdesk::test {
namespace {

// Scores of the definition for query t (entries >= visible or outside the allowed blocks: -inf).
std::vector<float> reference_scores(const std::vector<float>& q, const std::vector<float>& w,
                                    const std::vector<uint8_t>& keys, int64_t t, int64_t heads,
                                    int64_t d, int64_t E, int64_t visible,
                                    const std::vector<uint8_t>* allowed) {
  std::vector<float> score(static_cast<size_t>(E), -INFINITY), key(static_cast<size_t>(d));
  const int64_t rb = kv_row_bytes(KvFormat::Fp4Key, d);
  for (int64_t s = 0; s < std::min(visible, E); ++s) {
    if (allowed && !(*allowed)[static_cast<size_t>(s)]) continue;
    cpu::dequantize_kv_row(KvFormat::Fp4Key, &keys[static_cast<size_t>(s * rb)], d, key.data());
    float total = 0.0f;
    for (int64_t h = 0; h < heads; ++h) {
      float dot = 0.0f;
      for (int64_t i = 0; i < d; ++i)
        dot += q[static_cast<size_t>((t * heads + h) * d + i)] * key[static_cast<size_t>(i)];
      total += round_bf16(std::max(round_bf16(dot), 0.0f) * w[static_cast<size_t>(t * heads + h)]);
    }
    score[static_cast<size_t>(s)] = round_bf16(total);
  }
  return score;
}

class CudaIndexerTest : public CudaOpTest {
 protected:
  // Whether check() selects inside a step graph (sizes in device memory, launches sized for a
  // bucket of entries).
  bool in_step_ = false;
  // Whether query t sees (t + 1) E / n entries (a prompt's rows, the first of them fewer than
  // k) rather than E less three a row after it.
  bool prompt_rows_ = false;
  // How many of the selection's placements check() runs: shared memory, then global memory on
  // two blocks and on one.
  int placements_ = 3;

  // distinct_keys > 0: key s is key s % distinct_keys, so that scores tie. width: the row the
  // selection is over (select_width; 0 = the entries).
  void check(int64_t n, int64_t heads, int64_t d, int64_t E, int64_t k, int64_t bs, int64_t C,
             bool candidates, bool restricted, uint32_t seed, int64_t distinct_keys = 0,
             int64_t width = 0) {
    std::vector<float> q = random_bf16(static_cast<size_t>(n * heads * d), seed, 1.0f);
    for (int64_t i = 0; i < n * heads * d; i += d)
      flashdesk::fake_quant_fp4_e8m0(&q[static_cast<size_t>(i)], static_cast<size_t>(d), 32);
    const std::vector<float> w =
        random_uniform(static_cast<size_t>(n * heads), seed + 1, -0.5f, 1.0f);
    std::vector<float> kv = random_bf16(static_cast<size_t>(E * d), seed + 2, 1.0f);
    if (distinct_keys > 0)
      for (int64_t s = distinct_keys; s < E; ++s)
        std::copy_n(&kv[static_cast<size_t>((s % distinct_keys) * d)], d,
                    &kv[static_cast<size_t>(s * d)]);
    const int64_t row = std::max(E, width);
    const int64_t rb = kv_row_bytes(KvFormat::Fp4Key, d);
    std::vector<uint8_t> keys(static_cast<size_t>(std::max<int64_t>(E, 1) * rb));
    for (int64_t s = 0; s < E; ++s)
      cpu::quantize_kv_row(KvFormat::Fp4Key, &kv[static_cast<size_t>(s * d)], d,
                           &keys[static_cast<size_t>(s * rb)]);
    std::vector<int64_t> visible(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t)
      visible[static_cast<size_t>(t)] =
          prompt_rows_ ? (t + 1) * E / n : std::max<int64_t>(0, E - (n - 1 - t) * 3);
    if (n > 1 && !prompt_rows_) visible[0] = E + 5;  // beyond the entries: clamped
    const int64_t n_blocks = (row + bs - 1) / bs;
    std::mt19937 rng(seed + 3);
    std::vector<int32_t> restrict_ids(static_cast<size_t>(n * C), -1);
    if (restricted)
      for (auto& b : restrict_ids)
        b = rng() % 4 == 0 ? -1 : static_cast<int32_t>(rng() % uint32_t(n_blocks));

    Pair qt = both_f32(Shape{n, heads, d}, q), wt = both_f32(Shape{n, heads}, w);
    Pair kt = both(DType::U8, Shape{std::max<int64_t>(E, 1), rb}, keys);
    Pair rt = both(DType::I32, Shape{n, C}, restrict_ids);
    IndexerArgs a;
    a.q = &qt.gpu;
    a.weights = &wt.gpu;
    a.n_visible = visible;
    a.keys = EntryCache{&kt.gpu, E};
    a.restrict_blocks = restricted ? &rt.gpu : nullptr;
    a.block_size = bs;
    a.select_width = width;
    // Torch's tie selection in shared memory (where the row fits) and in global memory, there
    // with the top-k and the candidates on two blocks and on one (set_select_split); the scores
    // one entry a lane group and two (set_score_pairs_from).
    const int64_t pairs_from = gpu().score_pairs_from();
    for (int placement = 0; placement < placements_; ++placement) {
      const bool shared = placement == 0;
      gpu().set_select_in_shared_memory(shared);
      gpu().set_select_split(placement == 1);
      gpu().set_score_pairs_from(shared ? int64_t{1} << 40 : 0);
      Tensor topk = gpu_poisoned(DType::I32, Shape{n, k});
      Tensor cand = gpu_poisoned(DType::I32, Shape{n, std::min(C, n_blocks)});
      if (in_step_) gpu().step_graph_begin(1);
      gpu().indexer_select(a, topk, candidates ? &cand : nullptr);
      if (in_step_) gpu().step_graph_end();
      gpu().set_select_in_shared_memory(true);
      gpu().set_select_split(true);
      gpu().set_score_pairs_from(pairs_from);
      const std::vector<int32_t> got = from_gpu<int32_t>(topk);
      const std::vector<int32_t> got_c =
          candidates ? from_gpu<int32_t>(cand) : std::vector<int32_t>();
      if (shared && !in_step_) {
        // The same selection over the op's own score rows given back (indexer_select_rows, what
        // cuda_select_bench --rows times), the visible counts clamped to the entries as the op
        // clamps them.
        const Tensor scores = gpu().indexer_scores(a);
        std::vector<int64_t> seen(visible);
        for (int64_t& v : seen) v = std::min(v, E);
        Tensor topk_rows = gpu_poisoned(DType::I32, Shape{n, k});
        Tensor cand_rows = gpu_poisoned(DType::I32, Shape{n, std::min(C, n_blocks)});
        gpu().indexer_select_rows(scores, seen, bs, topk_rows, candidates ? &cand_rows : nullptr);
        EXPECT_EQ(from_gpu<int32_t>(topk_rows), got) << "top-k from the score rows";
        if (candidates) {
          EXPECT_EQ(from_gpu<int32_t>(cand_rows), got_c) << "candidates from the score rows";
        }
      }
      const int64_t cc = std::min(C, n_blocks);
      for (int64_t t = 0; t < n; ++t) {
        std::vector<uint8_t> allowed(static_cast<size_t>(row), 0);
        if (restricted)
          for (int64_t j = 0; j < C; ++j) {
            const int32_t b = restrict_ids[static_cast<size_t>(t * C + j)];
            if (b < 0) continue;
            for (int64_t s = b * bs; s < std::min(row, (b + 1) * bs); ++s)
              allowed[static_cast<size_t>(s)] = 1;
          }
        std::vector<float> score =
            reference_scores(q, w, keys, t, heads, d, E, visible[static_cast<size_t>(t)],
                             restricted ? &allowed : nullptr);
        score.resize(static_cast<size_t>(row), -INFINITY);
        std::vector<int32_t> want(static_cast<size_t>(k));
        cpu::select_best(score, visible[static_cast<size_t>(t)], false, want);
        const std::string what = "query " + std::to_string(t) + " E=" + std::to_string(E) +
                                 (shared           ? " (shared)"
                                  : placement == 1 ? " (global, two blocks)"
                                                   : " (global, one block)");
        EXPECT_EQ(std::vector<int32_t>(got.begin() + t * k, got.begin() + (t + 1) * k), want)
            << what << " top-k";
        if (!candidates) continue;
        std::vector<float> block(static_cast<size_t>(n_blocks), -INFINITY);
        for (int64_t s = 0; s < row; ++s)
          block[static_cast<size_t>(s / bs)] =
              std::max(block[static_cast<size_t>(s / bs)], score[static_cast<size_t>(s)]);
        const int64_t vis = std::min(visible[static_cast<size_t>(t)], E);
        if (vis >= 1) block[static_cast<size_t>((vis - 1) / bs)] = INFINITY;
        std::vector<int32_t> want_c(static_cast<size_t>(cc));
        cpu::select_best(block, n_blocks, true, want_c);
        EXPECT_EQ(std::vector<int32_t>(got_c.begin() + t * cc, got_c.begin() + (t + 1) * cc),
                  want_c)
            << what << " candidates";
      }
    }
  }
};

TEST_F(CudaIndexerTest, TopKWithVisibilityLimits) {
  check(3, 4, 64, 100, 16, 8, 8, false, false, 1);
  check(1, 8, 128, 37, 37, 8, 8, false, false, 2);  // k == entries: every entry, -1 past visible
}

TEST_F(CudaIndexerTest, CandidateBlocksOfTheCandidateSource) {
  check(4, 4, 64, 203, 20, 8, 6, true, false, 3);
}

TEST_F(CudaIndexerTest, ReindexRestriction) {
  check(3, 4, 64, 160, 24, 8, 5, false, true, 4);
}

// Scores from 3 or 7 distinct keys: nearly every threshold is a tie, decided as torch decides it
// (both of its paths: nth_element when 64 k > the row, partial_sort otherwise), over rows wider
// than the cache (select_width).
TEST_F(CudaIndexerTest, TiesAsTorchBreaksThem) {
  for (const SelectFormCase& form : kSelectForms) {  // every form of torch's selection
    SCOPED_TRACE(form.what);
    use_select_form(gpu(), form);
    check(3, 4, 64, 100, 16, 8, 8, true, false, 7, 3);
    check(2, 4, 64, 300, 4, 8, 8, true, false, 8, 7);  // 64 k <= 300: partial_sort
    check(3, 4, 64, 160, 24, 8, 5, false, true, 9, 3);
    check(2, 4, 64, 90, 16, 8, 6, true, false, 10, 7, 120);
  }
}

// Rows held in registers, several entries a thread (the decode row's form: 16 a thread at
// 16,384), their candidate block maxima taken from registers (whole blocks in a thread's run),
// with ties at the k-th best and without. (The emulation's 99 KiB of shared memory holds rows of
// up to about 6,000 entries; the 16,384-entry rows take this path on the GPU only.)
TEST_F(CudaIndexerTest, RowsHeldInRegisters) {
  for (const SelectFormCase& form : kSelectForms) {  // every form of torch's selection
    SCOPED_TRACE(form.what);
    use_select_form(gpu(), form);
    check(2, 4, 64, 3000, 256, 4, 64, true, false, 13, 5, 4096);  // 4 a thread, blocks of 4
    check(2, 4, 64, 3000, 256, 2, 64, true, false, 17, 5, 4096);  // two blocks a thread
    check(1, 4, 64, 16384, 512, 8, 256, true, false, 14, 50);     // 16 a thread, ties
    check(1, 4, 64, 16384, 512, 8, 300, true, false, 15);         // 16 a thread, no tie
    check(1, 4, 64, 16385, 512, 8, 300, true, false, 18, 50);     // 17 a thread (a decode step's)
    check(2, 4, 64, 5000, 300, 8, 40, false, true, 16, 7, 6000);  // 6 a thread, restricted
  }
}

// Inside a step graph the sizes are device values and the launches are sized for a bucket of
// entries: the same ids, ties and candidates included, whether the step is captured or replayed.
TEST_F(CudaIndexerTest, InsideAStepGraph) {
  gpu().set_step_graphs(true);
  in_step_ = true;
  check(3, 4, 64, 100, 16, 8, 8, true, false, 21, 3);
  check(3, 4, 64, 101, 16, 8, 8, true, false, 21, 3);  // same bucket, one more entry
  check(3, 4, 64, 160, 24, 8, 5, false, true, 22, 3);
  check(2, 4, 64, 90, 16, 8, 6, true, false, 23, 7, 120);
  check(1, 4, 64, 600, 64, 8, 16, true, false, 24, 5);  // past the first bucket
  EXPECT_GT(gpu().step_graph_counts().launches, 0u);
}

// A prompt's rows: the first ones see fewer than k entries and tie at -inf past their limit
// only, where torch's choice cannot show and is skipped (held rows in shared memory, streamed rows
// in global memory); later rows tie at their k-th best (few distinct keys), and under a Reindex
// restriction the -inf equals lie below the limit too, where torch's choice counts.
TEST_F(CudaIndexerTest, PromptRowsTiedPastTheirLimit) {
  prompt_rows_ = true;
  check(8, 4, 64, 256, 48, 8, 8, true, false, 31, 5);
  check(8, 4, 64, 256, 48, 8, 5, false, true, 32, 5);  // restricted: -inf below the limit
  check(8, 4, 64, 300, 4, 8, 8, true, false, 34, 7);   // 64 k <= 300: partial_sort
}

// The same on a prefill-sized call (64 rows), whose selecting blocks take
// set_prefill_select_threads in shared memory, doubled where a row would not be held in
// registers. (1024 threads, the decode rows' count, run in the other tests; on the CPU emulation a
// call of 64 rows on 1024-thread blocks takes about two minutes.)
TEST_F(CudaIndexerTest, PromptRowsOnSmallerBlocks) {
  prompt_rows_ = true;
  placements_ = 1;  // the setting is the shared-memory placement's
  const int threads_before = gpu().prefill_select_threads();
  for (const int threads : {256, 64}) {
    SCOPED_TRACE(std::to_string(threads) + " threads a selecting block");
    gpu().set_prefill_select_threads(threads);
    check(64, 4, 64, 256, 48, 8, 8, true, false, 31, 5);
    check(64, 4, 64, 256, 48, 8, 5, false, true, 32, 5);    // restricted: -inf below the limit
    check(64, 4, 64, 200, 32, 8, 8, true, false, 33);       // keys all different
    check(64, 4, 64, 300, 4, 8, 8, true, false, 34, 7);     // 64 k <= 300: partial_sort
    check(64, 4, 64, 1400, 96, 8, 16, true, false, 35, 5);  // wider than 18 x 64: 128 threads
  }
  gpu().set_prefill_select_threads(threads_before);
}

// An 8K-token prompt's rows at V4.1's widths on blocks of fewer threads: 8,192 entries (ratio 1,
// raised to 512 threads to be held in registers) and 4,096 (ratio 2, 256 threads), ties at the
// 512th. On a GPU only: the emulation's shared memory holds rows of up to about 6,000 entries.
TEST_F(CudaIndexerTest, PromptRowsAtFullWidthOnSmallerBlocks) {
  FD_REQUIRE_FULL_SHAPES();
  prompt_rows_ = true;
  placements_ = 1;  // the setting is the shared-memory placement's
  const int threads_before = gpu().prefill_select_threads();
  gpu().set_prefill_select_threads(256);
  check(64, 32, 128, 8192, 512, 8, 2048, true, false, 36, 50);
  check(64, 32, 128, 4096, 512, 8, 2048, false, false, 37, 50);
  gpu().set_prefill_select_threads(threads_before);
}

// FLASHDESK_CUDA_SELECT_THREADS takes a power of two from 64 to 1024; anything else stops the
// backend's construction with the variable named, as every FLASHDESK_CUDA_* switch does.
using CudaIndexerDeathTest = CudaIndexerTest;
TEST_F(CudaIndexerDeathTest, BadSelectThreadsAreRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* bad : {"0", "32", "96", "2048", "many", ""}) {
    ::setenv("FLASHDESK_CUDA_SELECT_THREADS", bad, 1);
    EXPECT_DEATH(CudaBackend be(0), "FLASHDESK_CUDA_SELECT_THREADS") << "'" << bad << "'";
  }
  ::setenv("FLASHDESK_CUDA_SELECT_THREADS", "256", 1);
  {
    CudaBackend be(0);
    EXPECT_EQ(be.prefill_select_threads(), 256);
  }
  ::unsetenv("FLASHDESK_CUDA_SELECT_THREADS");
}

TEST_F(CudaIndexerTest, FullShapes) {
  FD_REQUIRE_FULL_SHAPES();
  for (const SelectFormCase& form : kSelectForms) {  // every form of torch's selection
    SCOPED_TRACE(form.what);
    use_select_form(gpu(), form);
    check(1, 32, 128, 16384, 512, 8, 2048, true, false, 5);
    check(4, 32, 128, 16384, 512, 8, 2048, false, true, 6);
    check(2, 32, 128, 16384, 512, 8, 2048, true, false, 11, 50);  // ties at full width
    // A decode step's row at a 16K context (4096 entries), ties at the k-th best.
    check(2, 32, 128, 4096, 512, 8, 512, true, false, 12, 50);
    // Long contexts' decode rows, ties at the k-th best: 65,536 entries (torch heap-selects the
    // top 512, in global memory with the heap in shared memory) and 1M (the 2,048 candidate
    // blocks of 131,072 heap-selected too).
    check(1, 4, 64, 65536, 512, 8, 2048, true, false, 19, 50);
    check(1, 4, 64, 1048576, 512, 8, 2048, true, false, 20, 50);
  }
}

}  // namespace
}  // namespace flashdesk::test
