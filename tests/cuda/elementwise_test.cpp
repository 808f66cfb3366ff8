// Row-wise ops of the CUDA backend against cpu-reference on random inputs: RMSNorm and RoPE within
// 1 BF16 ulp (the sum of squares and sin/cos may round differently), scaling, rounding, the FP4
// fake-quant of index queries and the embedding lookup bit-identical.
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

class CudaElementwiseTest : public CudaOpTest {
 protected:
  void check_rms_norm(int64_t n, int64_t d, bool weighted, uint32_t seed) {
    Pair x = both_f32(Shape{n, d}, random_bf16(static_cast<size_t>(n * d), seed, 3.0f));
    Pair w = both_f32(Shape{d}, random_uniform(static_cast<size_t>(d), seed + 1, 0.5f, 1.5f));
    Tensor yg = gpu_poisoned(DType::F32, Shape{n, d});
    Tensor yc = cpu().alloc(DType::F32, Shape{n, d});
    gpu().rms_norm(x.gpu, weighted ? &w.gpu : nullptr, 1e-6f, yg);
    cpu().rms_norm(x.cpu, weighted ? &w.cpu : nullptr, 1e-6f, yc);
    expect_bf16_close(from_gpu<float>(yg), from_cpu<float>(yc), 1.0, 0.0, "rms_norm");
    // In place, as the model calls it.
    gpu().rms_norm(x.gpu, weighted ? &w.gpu : nullptr, 1e-6f, x.gpu);
    expect_bf16_close(from_gpu<float>(x.gpu), from_cpu<float>(yc), 1.0, 0.0, "rms_norm in place");
  }
};

TEST_F(CudaElementwiseTest, RmsNormMatchesTheReference) {
  check_rms_norm(3, 96, true, 1);
  check_rms_norm(2, 1000, false, 2);
  // Many rows of more than 8 values a thread: the looping kernel, not the held one.
  check_rms_norm(140, 2100, true, 6);
}

TEST_F(CudaElementwiseTest, RmsNormAtFullShapes) {
  FD_REQUIRE_FULL_SHAPES();
  check_rms_norm(4, 5120, true, 3);  // attn_norm / ffn_norm
  check_rms_norm(4, 1280, true, 4);  // q_norm
  check_rms_norm(4, 512, true, 5);   // kv_norm
}

// 3 heads: one group of the kernel's 8 heads a thread, partial; 19: two whole groups and a third.
TEST_F(CudaElementwiseTest, RopeAndItsInverseMatchTheReference) {
  const int64_t n = 5, hd = 64, rope = 32;
  std::vector<float> inv_freq(rope / 2);
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * double(i) / rope));
  const std::vector<int64_t> pos = {0, 1, 17, 4095, 1000003};
  for (int64_t heads : {3, 19})
    for (bool inverse : {false, true}) {
      Pair x = both_f32(Shape{n, heads, hd}, random_bf16(static_cast<size_t>(n * heads * hd), 7));
      gpu().rope(x.gpu, hd, pos, inv_freq, inverse);
      cpu().rope(x.cpu, hd, pos, inv_freq, inverse);
      expect_bf16_close(
          from_gpu<float>(x.gpu), from_cpu<float>(x.cpu), 1.0, 0.0,
          std::string(inverse ? "inverse rope, " : "rope, ") + std::to_string(heads) + " heads");
    }
}

TEST_F(CudaElementwiseTest, ScaleRoundAndFakeQuantAreBitIdentical) {
  const std::vector<float> v = random_uniform(4 * 256, 9, -40.0f, 40.0f);
  Pair x = both_f32(Shape{4, 256}, v);
  gpu().scale(x.gpu, 0.37f);
  cpu().scale(x.cpu, 0.37f);
  expect_identical(from_gpu<float>(x.gpu), from_cpu<float>(x.cpu), "scale");
  gpu().round_bf16(x.gpu);
  cpu().round_bf16(x.cpu);
  expect_identical(from_gpu<float>(x.gpu), from_cpu<float>(x.cpu), "round_bf16");
  // Index queries: blocks of 32 with tiny, zero and mixed magnitudes.
  std::vector<float> q = random_bf16(2 * 4 * 128, 10, 2.0f);
  for (int i = 0; i < 32; ++i) q[32 + i] = 1e-30f * static_cast<float>(i);
  for (int i = 0; i < 32; ++i) q[64 + i] = 0.0f;
  // Blocks of 16 and 32 take the lane-per-value kernel, 64 the thread-per-block one.
  for (const int64_t block : {16, 32, 64}) {
    Pair qi = both_f32(Shape{2, 4, 128}, q);
    gpu().fake_quant_fp4_e8m0(qi.gpu, block);
    cpu().fake_quant_fp4_e8m0(qi.cpu, block);
    expect_identical(from_gpu<float>(qi.gpu), from_cpu<float>(qi.cpu),
                     "fake_quant_fp4_e8m0 block " + std::to_string(block));
  }
}

TEST_F(CudaElementwiseTest, EmbedCopiesTheRowIntoEveryStream) {
  const int64_t vocab = 50, d = 40, hc = 4;
  std::vector<uint16_t> table(static_cast<size_t>(vocab * d));
  for (size_t i = 0; i < table.size(); ++i) table[i] = f32_to_bf16(std::sin(float(i)) * 3.0f);
  Pair t = both(DType::BF16, Shape{vocab, d}, table);
  const std::vector<int32_t> ids = {3, 49, 0, 3};
  Pair rows = both_alloc(DType::F32, Shape{4, d});
  Pair X = both_alloc(DType::F32, Shape{4, hc, d});
  gpu().embed(t.gpu, ids, rows.gpu, X.gpu);
  cpu().embed(t.cpu, ids, rows.cpu, X.cpu);
  expect_identical(from_gpu<float>(rows.gpu), from_cpu<float>(rows.cpu), "embed rows");
  expect_identical(from_gpu<float>(X.gpu), from_cpu<float>(X.cpu), "embed streams");
  // Streams stored as BF16 (CudaBackend::stream_dtype): the table's bits in every stream.
  Tensor X16 = gpu().alloc(DType::BF16, Shape{4, hc, d});
  gpu().embed(t.gpu, ids, rows.gpu, X16);
  const std::vector<uint16_t> bits = from_gpu<uint16_t>(X16);
  std::vector<float> widened(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) widened[i] = bf16_to_f32(bits[i]);
  expect_identical(widened, from_cpu<float>(X.cpu), "embed streams, BF16");
}

}  // namespace
}  // namespace flashdesk::test
