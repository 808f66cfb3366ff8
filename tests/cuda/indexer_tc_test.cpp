// The indexer's scores on the tensor cores (indexer_tc.cu) against the CUDA-core kernel, to the
// bit, at prefill sizes (indexer_test.cpp checks the CUDA-core kernel against the definition):
// V4.1's 32 heads x 128, ratio 1 and 2 rows whose visible counts stay below the row's width,
// ragged query groups and key tiles, a Reindex restriction, 64 heads, heads that leave padding
// rows, and inputs whose dot products the tensor cores' summation order could round differently
// (scales spread over many powers of two, queries that are not FP4 or not BF16, extreme key
// scales), which the kernel must redo in the CUDA-core kernel's order.
#include "engine/ops/cpu/kernels.h"
#include "engine/util/quant.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

using Kernels = CudaBackend::IndexerKernels;

// One call: its queries, the cache, the row and the queries' visible counts.
struct CallShape {
  int64_t n, heads, d;
  int64_t entries;  // keys in the cache
  int64_t width;    // the selection's row (select_width)
  int64_t ratio;    // compression ratio m: query t sees floor((first + t + 1) / m) entries
  int64_t first;    // the position of query 0
};

// How far from FP4-quantised model data the inputs are.
enum class Data {
  // q fake-quantised (E2M1 x UE8M0 per 32), as the model's.
  Fp4,
  // The same, with three pairs of heads a query whose terms cancel (head j a copy of head i, its
  // weight -w_i, w_i scaled by 2^14 .. 2^20): what the other heads' terms keep of their low bits
  // depends on where the pairs sit in the order of the head sum.
  CancellingHeads,
  // Wide weights, per-32 scales of q and keys spread over 2^-8 .. 2^14, raw BF16 and F32 query
  // rows.
  SpreadScales,
  // The same, and key blocks with extreme scale codes (subnormal, huge and infinite values).
  ExtremeKeyScales
};

bool spread(Data d) {
  return d == Data::SpreadScales || d == Data::ExtremeKeyScales;
}

class CudaIndexerTensorCoreTest : public CudaOpTest {
 protected:
  void TearDown() override {
    if (!IsSkipped()) gpu().set_indexer_kernels(Kernels::Auto);
  }

  // Each 32-block of `v` (rows of d values) times 2^x, x in -8 .. 14 for a third of the blocks
  // and 0 for the rest.
  static void spread_blocks(std::vector<float>& v, uint32_t seed) {
    std::mt19937 rng(seed);
    for (size_t b = 0; b < v.size(); b += 32) {
      const int x = rng() % 3 == 0 ? static_cast<int>(rng() % 23) - 8 : 0;
      for (size_t i = b; i < std::min(v.size(), b + 32); ++i) v[i] = std::ldexp(v[i], x);
    }
  }

  // Query values: FP4 fake-quantised per head row (spread first with SpreadScales, where an
  // eighth of the rows stay raw BF16 and an eighth become F32 values BF16 does not hold).
  static std::vector<float> queries(const CallShape& s, Data data, uint32_t seed) {
    std::vector<float> q = random_bf16(static_cast<size_t>(s.n * s.heads * s.d), seed, 1.0f);
    if (spread(data)) spread_blocks(q, seed + 6);
    std::mt19937 rng(seed + 7);
    for (int64_t row = 0; row < s.n * s.heads; ++row) {
      float* v = &q[static_cast<size_t>(row * s.d)];
      const uint32_t kind = spread(data) ? rng() % 8 : 2;
      if (kind == 1)
        for (int64_t i = 0; i < s.d; ++i) v[i] *= 1.0f + 0x1p-12f;
      if (kind >= 2) flashdesk::fake_quant_fp4_e8m0(v, static_cast<size_t>(s.d), 32);
    }
    return q;
  }

  // Data::CancellingHeads: three pairs of heads a query made to cancel.
  static void cancel_heads(const CallShape& s, std::vector<float>& q, std::vector<float>& w,
                           uint32_t seed) {
    std::mt19937 rng(seed);
    for (int64_t t = 0; t < s.n; ++t)
      for (int pair = 0; pair < 3; ++pair) {
        const int64_t i = rng() % s.heads, j = (i + 1 + rng() % (s.heads - 1)) % s.heads;
        std::copy_n(&q[static_cast<size_t>((t * s.heads + i) * s.d)], s.d,
                    &q[static_cast<size_t>((t * s.heads + j) * s.d)]);
        float& wi = w[static_cast<size_t>(t * s.heads + i)];
        wi = std::ldexp(wi, 14 + static_cast<int>(rng() % 7));
        w[static_cast<size_t>(t * s.heads + j)] = -wi;
      }
  }

  static std::vector<uint8_t> keys(const CallShape& s, Data data, uint32_t seed) {
    std::vector<float> kv = random_bf16(static_cast<size_t>(s.entries * s.d), seed, 1.0f);
    if (spread(data)) spread_blocks(kv, seed + 5);
    const int64_t rb = kv_row_bytes(KvFormat::Fp4Key, s.d);
    std::vector<uint8_t> rows(static_cast<size_t>(std::max<int64_t>(s.entries, 1) * rb));
    for (int64_t e = 0; e < s.entries; ++e)
      cpu::quantize_kv_row(KvFormat::Fp4Key, &kv[static_cast<size_t>(e * s.d)], s.d,
                           &rows[static_cast<size_t>(e * rb)]);
    if (data == Data::ExtremeKeyScales)
      for (int64_t e = 3; e < s.entries; e += 17) {
        const uint8_t extreme[] = {0, 1, 250, 253, 255};
        rows[static_cast<size_t>(e * rb + s.d / 2 + (e % (s.d / 32)))] = extreme[e % 5];
      }
    return rows;
  }

  // Scores of both kernels must agree to the bit; with k > 0 the top-k too.
  void check(const CallShape& s, Data data, uint32_t seed, int64_t k = 0, int64_t restrict_c = 0,
             int64_t block_size = 8) {
    std::vector<float> q = queries(s, data, seed);
    std::vector<float> w =
        random_uniform(static_cast<size_t>(s.n * s.heads), seed + 1, -0.5f, 1.0f);
    std::mt19937 wrng(seed + 4);
    for (float& x : w)
      x = round_bf16(spread(data) ? std::ldexp(x, static_cast<int>(wrng() % 25) - 12) : x);
    if (data == Data::CancellingHeads) cancel_heads(s, q, w, seed + 8);
    const std::vector<uint8_t> key_rows = keys(s, data, seed + 2);
    std::vector<int64_t> visible(static_cast<size_t>(s.n));
    for (int64_t t = 0; t < s.n; ++t)
      visible[static_cast<size_t>(t)] = std::min(s.entries, (s.first + t + 1) / s.ratio);
    const int64_t row = std::max(s.entries, s.width),
                  n_blocks = (row + block_size - 1) / block_size;
    std::mt19937 rng(seed + 3);
    std::vector<int32_t> restrict_ids(static_cast<size_t>(s.n * std::max<int64_t>(restrict_c, 1)),
                                      -1);
    for (auto& b : restrict_ids)
      b = rng() % 5 == 0 ? -1 : static_cast<int32_t>(rng() % uint32_t(n_blocks));

    const int64_t rb = kv_row_bytes(KvFormat::Fp4Key, s.d);
    Pair qt = both_f32(Shape{s.n, s.heads, s.d}, q), wt = both_f32(Shape{s.n, s.heads}, w);
    Pair kt = both(DType::U8, Shape{std::max<int64_t>(s.entries, 1), rb}, key_rows);
    Pair rt = both(DType::I32, Shape{s.n, std::max<int64_t>(restrict_c, 1)}, restrict_ids);
    IndexerArgs a;
    a.q = &qt.gpu;
    a.weights = &wt.gpu;
    a.n_visible = visible;
    a.keys = EntryCache{&kt.gpu, s.entries};
    a.restrict_blocks = restrict_c > 0 ? &rt.gpu : nullptr;
    a.block_size = block_size;
    a.select_width = s.width;

    const std::string what = "n=" + std::to_string(s.n) + " heads=" + std::to_string(s.heads) +
                             " d=" + std::to_string(s.d) + " E=" + std::to_string(s.entries) +
                             " width=" + std::to_string(row);
    // The CUDA-core kernel, then the tensor cores with each CTA decoding its key tiles and with
    // the keys decoded once (set_index_keys_decoded).
    std::vector<float> scores[3];
    std::vector<int32_t> topk[3];
    const Kernels kernels[3] = {Kernels::CudaCores, Kernels::TensorCores, Kernels::TensorCores};
    const bool keys_before = gpu().index_keys_decoded();
    for (int i = 0; i < 3; ++i) {
      gpu().set_indexer_kernels(kernels[i]);
      gpu().set_index_keys_decoded(i == 2);
      scores[i] = from_gpu<float>(gpu().indexer_scores(a));
      if (k == 0) continue;
      Tensor ids = gpu_poisoned(DType::I32, Shape{s.n, k});
      gpu().indexer_select(a, ids, nullptr);
      topk[i] = from_gpu<int32_t>(ids);
    }
    gpu().set_index_keys_decoded(keys_before);
    // Every row must have a live entry and a -inf one, else the comparison proves little.
    size_t finite = 0;
    for (float x : scores[0]) finite += std::isfinite(x) ? 1 : 0;
    EXPECT_GT(finite, 0u) << what;
    EXPECT_LT(finite, scores[0].size()) << what;
    for (int i = 1; i < 3; ++i) {
      const std::string form = i == 1 ? " (keys decoded a tile at a time)" : " (keys decoded once)";
      expect_identical(scores[i], scores[0], what + form + " scores");
      if (k > 0) expect_identical(topk[i], topk[0], what + form + " top-k");
    }
  }
};

// V4.1's shapes at ratio 1: a Full layer's rows (32 heads x 128), 70 queries (the last CTA's
// group half empty), rows of 300 entries (the last key tile ragged), the cache 40 entries short
// of the row and the first query seeing 191.
TEST_F(CudaIndexerTensorCoreTest, FullLayerRatio1) {
  check({70, 32, 128, 260, 300, 1, 190}, Data::Fp4, 21);
}

// Head sums that round differently in another order: they must run in head order.
TEST_F(CudaIndexerTensorCoreTest, HeadSumInHeadOrder) {
  check({64, 32, 128, 150, 192, 1, 90}, Data::CancellingHeads, 29);
}

// Ratio 2 with a Reindex restriction (12 candidate blocks of 8 entries a query).
TEST_F(CudaIndexerTensorCoreTest, ReindexRatio2) {
  check({66, 32, 128, 233, 250, 2, 399}, Data::Fp4, 22, 32, 12);
}

// 64 heads (two queries a CTA) at head dim 64; 20 heads (padding rows, whole padding warps) and
// 8 heads (eight queries a CTA), forced onto the tensor cores below the prefill size.
TEST_F(CudaIndexerTensorCoreTest, HeadCounts) {
  check({65, 64, 64, 130, 130, 1, 64}, Data::Fp4, 23);
  check({9, 20, 64, 100, 140, 1, 90}, Data::Fp4, 24);
  check({17, 8, 128, 75, 75, 1, 58}, Data::Fp4, 25);
}

// Dot products whose partial sums are not all exact: the kernel must notice and redo them in the
// CUDA-core kernel's order.
TEST_F(CudaIndexerTensorCoreTest, InexactSumsRedoneInOrder) {
  check({64, 32, 128, 200, 200, 1, 136}, Data::SpreadScales, 26);
  check({12, 16, 64, 90, 96, 2, 150}, Data::SpreadScales, 27);
}

// Keys of subnormal, huge and infinite values (NaN and inf scores included) as the CUDA-core
// kernel scores them.
TEST_F(CudaIndexerTensorCoreTest, ExtremeKeyScales) {
  check({64, 16, 128, 120, 128, 1, 56}, Data::ExtremeKeyScales, 30);
}

// Shapes the kernel does not take (head dim 96) fall back to the CUDA-core kernel.
TEST_F(CudaIndexerTensorCoreTest, FallbackShape) {
  check({5, 4, 96, 40, 40, 1, 35}, Data::Fp4, 28);
}

}  // namespace
}  // namespace flashdesk::test
