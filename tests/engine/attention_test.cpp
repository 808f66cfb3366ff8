// Sparse attention of every backend: a hand-computed single key with a sink, and a mixed case
// (ring slots, this step's rows, an empty slot, top-k entries) against a double-precision
// softmax over the independently chosen key list. Tolerance: 1 BF16 ulp of the output scale.
#include <cmath>
#include <vector>

#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

using AttentionTest = BackendTest;

constexpr int64_t kD = 32;

TEST_P(AttentionTest, SinkOnlyEntersTheDenominator) {
  std::vector<float> v(kD, 0.0f), q(kD, 0.0f);
  v[0] = 1.0f;
  q[0] = 2.0f;
  Tensor ring = be().zeros(DType::U8, Shape{4, kv_row_bytes(KvFormat::Fp8Window, kD)});
  Tensor step = be().alloc(DType::U8, Shape{1, kv_row_bytes(KvFormat::Fp8Window, kD)});
  be().quantize_rows(KvFormat::Fp8Window, f32(Shape{1, kD}, v), step, 0);
  const std::vector<int64_t> ring_pos(4, -1), pos = {0};
  Tensor qt = f32(Shape{1, 1, kD}, q), sink = f32(Shape{1}, {0.0f});
  AttentionArgs a;
  a.q = &qt;
  a.positions = pos;
  a.window = WindowKv{&ring, ring_pos, &step, 0, 4};
  a.sink = &sink;
  a.softmax_scale = 1.0f;
  Tensor out = be().alloc(DType::F32, Shape{1, 1, kD});
  be().sparse_attention(a, out);
  const auto o = host<float>(out);
  const double want = std::exp(2.0) / (std::exp(2.0) + 1.0);  // logit 2, sink 0
  EXPECT_LE(bf16_ulps(o[0], want), 0.5);
  for (int64_t e = 1; e < kD; ++e) EXPECT_EQ(o[e], 0.0f);
}

TEST_P(AttentionTest, WindowRingStepAndEntriesMatchDoublePrecision) {
  const int64_t W = 4, H = 2;
  const int64_t win_row = kv_row_bytes(KvFormat::Fp8Window, kD);
  // Ring: slot 3 = pos 3, slot 0 = pos 4, slot 1 empty (pos 5 missing), slot 2 = pos 2 (stale).
  Tensor ring = be().alloc(DType::U8, Shape{W, win_row});
  be().quantize_rows(KvFormat::Fp8Window, f32(Shape{W, kD}, bf16_values(W * kD, 1)), ring, 0);
  const std::vector<int64_t> ring_pos = {4, -1, 2, 3};
  Tensor step = be().alloc(DType::U8, Shape{2, win_row});  // positions 6, 7
  be().quantize_rows(KvFormat::Fp8Window, f32(Shape{2, kD}, bf16_values(2 * kD, 2)), step, 0);
  Tensor entries = be().alloc(DType::U8, Shape{2, kv_row_bytes(KvFormat::Fp4Entry, kD)});
  be().quantize_rows(KvFormat::Fp4Entry, f32(Shape{2, kD}, bf16_values(2 * kD, 3, 2.0f)), entries,
                     0);
  Tensor topk = make(DType::I32, Shape{2, 2}, std::vector<int32_t>{1, -1, 0, 1});
  const auto q = bf16_values(2 * H * kD, 4, 2.0f);
  Tensor qt = f32(Shape{2, H, kD}, q), sink = f32(Shape{H}, {0.5f, -1.0f});
  const std::vector<int64_t> pos = {6, 7};
  AttentionArgs a;
  a.q = &qt;
  a.positions = pos;
  a.window = WindowKv{&ring, ring_pos, &step, 6, W};
  a.compressed = EntryCache{&entries, 2};
  a.topk = &topk;
  a.sink = &sink;
  a.softmax_scale = 1.0f / std::sqrt(32.0f);
  Tensor out = be().alloc(DType::F32, Shape{2, H, kD});
  be().sparse_attention(a, out);
  const auto got = host<float>(out);

  // Independent key lists: query 6 -> ring pos 3 (slot 3), pos 4 (slot 0), step 6, entry 1;
  // query 7 -> pos 4 (slot 0), step 6, step 7, entries 0 and 1. Pos 5 is missing, pos 2 stale.
  Tensor rf = be().alloc(DType::F32, Shape{W, kD}), sf = be().alloc(DType::F32, Shape{2, kD});
  Tensor ef = be().alloc(DType::F32, Shape{2, kD});
  be().dequantize_rows(KvFormat::Fp8Window, ring, 0, rf);
  be().dequantize_rows(KvFormat::Fp8Window, step, 0, sf);
  be().dequantize_rows(KvFormat::Fp4Entry, entries, 0, ef);
  const auto r = host<float>(rf), s = host<float>(sf), e = host<float>(ef);
  const std::vector<std::vector<const float*>> keys = {{&r[3 * kD], &r[0], &s[0], &e[kD]},
                                                       {&r[0], &s[0], &s[kD], &e[0], &e[kD]}};
  const double sinks[] = {0.5, -1.0};
  for (int t = 0; t < 2; ++t)
    for (int h = 0; h < H; ++h) {
      const float* qh = &q[(t * H + h) * kD];
      std::vector<double> p;
      double denom = std::exp(sinks[h]);
      for (const float* k : keys[t]) {
        double l = 0;
        for (int64_t i = 0; i < kD; ++i) l += double(qh[i]) * k[i];
        p.push_back(std::exp(l / std::sqrt(32.0)));
        denom += p.back();
      }
      for (int64_t i = 0; i < kD; ++i) {
        double want = 0;
        for (size_t j = 0; j < p.size(); ++j) want += p[j] * keys[t][j][i];
        want /= denom;
        EXPECT_LE(std::fabs(got[(t * H + h) * kD + i] - want), bf16_ulp(2.0)) << t << h << i;
      }
    }
}

FD_BACKEND_TEST_SUITE(AttentionTest);

}  // namespace
}  // namespace flashdesk::test
