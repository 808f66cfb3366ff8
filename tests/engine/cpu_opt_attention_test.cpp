// Sparse attention and the indexer of the optimised CPU backend against the reference backend:
// rings with empty and stale slots, this step's rows, top-k entries with -1 gaps, decode (one
// query) and prefill (many). Every ISA sums in the reference's order: attention outputs must be
// the reference's bits, top-k ids and candidate blocks identical.
#include <vector>

#include "engine/util/quant.h"
#include "tests/engine/cpu_opt_test_util.h"

namespace flashdesk::test {
namespace {

class CpuOptAttentionTest : public OptTest {
 protected:
  Tensor cache(KvFormat f, int64_t rows, int64_t dim, Rng& rng, float amp) {
    Tensor t = ref().alloc(DType::U8, Shape{rows, kv_row_bytes(f, dim)});
    ref().quantize_rows(f, f32(Shape{rows, dim}, rng.bf16s(static_cast<size_t>(rows * dim), amp)),
                        t, 0);
    return t;
  }

  // A step of n queries at positions first..first+n-1 over a ring of W slots (filled by the
  // positions before `first`, one slot emptied), the step's rows and E compressed entries.
  void run(int64_t n, int64_t heads, int64_t d, int64_t W, int64_t first, int64_t E, int64_t k,
           uint32_t seed) {
    Rng rng(seed);
    Tensor ring = cache(KvFormat::Fp8Window, W, d, rng, 2.0f);
    std::vector<int64_t> ring_pos(static_cast<size_t>(W), -1);
    for (int64_t p = std::max<int64_t>(0, first - W); p < first; ++p) ring_pos[p % W] = p;
    if (first > 2) ring_pos[(first - 2) % W] = -1;                 // an empty slot
    if (first > W + 1) ring_pos[(first - 1) % W] = first - 1 - W;  // a stale slot
    Tensor step = cache(KvFormat::Fp8Window, n, d, rng, 2.0f);
    Tensor entries = cache(KvFormat::Fp4Entry, std::max<int64_t>(E, 1), d, rng, 3.0f);
    std::vector<int32_t> ids(static_cast<size_t>(n * k));
    for (auto& id : ids) id = E > 0 && rng.next() % 5 ? static_cast<int32_t>(rng.next() % E) : -1;
    Tensor topk = make(DType::I32, Shape{n, k}, ids);
    Tensor q = f32(Shape{n, heads, d}, rng.bf16s(static_cast<size_t>(n * heads * d), 2.0f));
    Tensor sink = f32(Shape{heads}, rng.bf16s(static_cast<size_t>(heads), 2.0f));
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[i] = first + i;
    AttentionArgs a;
    a.q = &q;
    a.positions = pos;
    a.window = WindowKv{&ring, ring_pos, &step, first, W};
    if (E > 0) {
      a.compressed = EntryCache{&entries, E};
      a.topk = &topk;
    }
    a.sink = &sink;
    a.softmax_scale = 1.0f / std::sqrt(static_cast<float>(d));
    Tensor o_ref = ref().alloc(DType::F32, Shape{n, heads, d}),
           o_opt = ref().alloc(DType::F32, Shape{n, heads, d});
    ref().sparse_attention(a, o_ref);
    opt().sparse_attention(a, o_opt);
    EXPECT_EQ(host<float>(o_opt), host<float>(o_ref)) << n << " queries, " << heads << " heads";
  }
};

TEST_P(CpuOptAttentionTest, MatchesTheReferenceInDecodeAndPrefill) {
  run(1, 4, 64, 16, 40, 10, 8, 1);      // decode: full ring (one empty, one stale slot)
  run(1, 2, 512, 128, 300, 50, 16, 2);  // full-size head dim and window
  run(20, 4, 64, 16, 5, 6, 4, 3);       // prefill: ring partly empty, many step rows
  run(3, 3, 96, 8, 0, 0, 0, 4);         // window only, first step (no ring, no entries)
}

using CpuOptIndexerTest = CpuOptAttentionTest;

TEST_P(CpuOptIndexerTest, TopKAndCandidatesEqualTheReference) {
  for (const auto& [n, heads, d, E, k, restrict, seed] :
       {std::tuple{1, 4, 128, 300, 16, false, 1}, std::tuple{1, 8, 64, 1000, 64, false, 2},
        std::tuple{12, 4, 128, 130, 8, true, 3}, std::tuple{70, 2, 32, 90, 10, false, 4},
        std::tuple{5, 3, 64, 0, 4, false, 5}}) {
    Rng rng(static_cast<uint32_t>(seed));
    Tensor keys = cache(KvFormat::Fp4Key, std::max(E, 1), d, rng, 2.0f);
    std::vector<float> qv = rng.bf16s(static_cast<size_t>(n * heads * d), 2.0f);
    fake_quant_fp4_e8m0(qv.data(), qv.size(), 32);  // the model's index queries are FP4 values
    Tensor q = f32(Shape{n, heads, d}, qv);
    // Head weights as the model makes them: bf16(weights_proj(x)) times an FP32 constant.
    std::vector<float> wv = rng.bf16s(static_cast<size_t>(n * heads), 1.0f);
    for (auto& v : wv) v *= 1.0f / std::sqrt(static_cast<float>(heads * d));
    Tensor w = f32(Shape{n, heads}, wv);
    std::vector<int64_t> visible(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) visible[t] = E == 0 ? 0 : (E * (t + 1)) / n - (t % 3);
    const int64_t bs = 8, n_blocks = std::max<int64_t>(1, (E + bs - 1) / bs), C = 4;
    std::vector<int32_t> blocks(static_cast<size_t>(n * C));
    for (auto& b : blocks) b = rng.next() % 4 ? static_cast<int32_t>(rng.next() % n_blocks) : -1;
    Tensor restriction = make(DType::I32, Shape{n, C}, blocks);
    IndexerArgs a;
    a.q = &q;
    a.weights = &w;
    a.n_visible = visible;
    a.keys = EntryCache{&keys, E};
    a.restrict_blocks = restrict ? &restriction : nullptr;
    a.block_size = bs;
    Tensor t_ref = ref().alloc(DType::I32, Shape{n, k}),
           t_opt = ref().alloc(DType::I32, Shape{n, k});
    Tensor c_ref = ref().alloc(DType::I32, Shape{n, C}),
           c_opt = ref().alloc(DType::I32, Shape{n, C});
    ref().indexer_select(a, t_ref, &c_ref);
    opt().indexer_select(a, t_opt, &c_opt);
    EXPECT_EQ(host<int32_t>(t_opt), host<int32_t>(t_ref)) << "case " << seed;
    EXPECT_EQ(host<int32_t>(c_opt), host<int32_t>(c_ref)) << "case " << seed;
  }
}

FD_OPT_TEST_SUITE(CpuOptAttentionTest);
FD_OPT_TEST_SUITE(CpuOptIndexerTest);

}  // namespace
}  // namespace flashdesk::test
