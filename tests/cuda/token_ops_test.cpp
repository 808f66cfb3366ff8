// The token ops of the CUDA backend (embed_rows, add_argmax, concat_columns) against cpu-reference:
// all bit-identical. The argmax rows hold the cases a block reduction could get wrong: the maximum
// tied across threads and warps (the lowest index wins), at the last column, NaN sums (never
// chosen, except at index 0), every value equal, and rows wider than one pass of the block.
#include <limits>

#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

class CudaTokenOpsTest : public CudaOpTest {
 protected:
  void check_add_argmax(int64_t n, int64_t V, const std::vector<float>& x,
                        const std::vector<float>& bias, const char* what) {
    Pair xs = both_f32(Shape{n, V}, x), b = both_f32(Shape{n, V}, bias);
    Tensor ids_gpu = gpu_poisoned(DType::I32, Shape{n});
    Tensor ids_cpu = cpu().alloc(DType::I32, Shape{n});
    gpu().add_argmax(xs.gpu, b.gpu, ids_gpu);
    cpu().add_argmax(xs.cpu, b.cpu, ids_cpu);
    // NaN sums compared as NaN: a GPU writes its canonical NaN, not the operand's payload.
    std::vector<float> got = from_gpu<float>(xs.gpu), want = from_cpu<float>(xs.cpu);
    for (size_t i = 0; i < got.size(); ++i)
      if (std::isnan(got[i]) && std::isnan(want[i])) got[i] = want[i];
    expect_identical(got, want, std::string(what) + " sums");
    expect_identical(from_gpu<int32_t>(ids_gpu), from_cpu<int32_t>(ids_cpu),
                     std::string(what) + " ids");
  }
};

TEST_F(CudaTokenOpsTest, AddArgmaxMatchesTheReferenceOnRandomRows) {
  const int64_t n = 4, V = 8192 + 37;  // more than 8 values a thread, a ragged last pass
  check_add_argmax(n, V, random_uniform(static_cast<size_t>(n * V), 1, -8.0f, 8.0f),
                   random_uniform(static_cast<size_t>(n * V), 2, -8.0f, 8.0f), "random");
}

TEST_F(CudaTokenOpsTest, AddArgmaxBreaksTiesAsTheReference) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  const int64_t n = 7, V = 3000;
  std::vector<float> x = random_bf16(static_cast<size_t>(n * V), 3);
  std::vector<float> bias(static_cast<size_t>(n * V), 0.0f);
  auto at = [&](int64_t row, int64_t v) -> float& { return x[static_cast<size_t>(row * V + v)]; };
  // Row 0: the maximum at three columns of different threads and warps.
  for (int64_t v : {2999, 1500, 33}) at(0, v) = 50.0f;
  // Row 1: tied at columns one block pass apart (1024) and in one warp.
  for (int64_t v : {2048, 1024, 5, 4}) at(1, v) = 50.0f;
  // Row 2: the maximum at the last column only.
  at(2, V - 1) = 50.0f;
  // Row 3: NaN sums all over, the maximum after them.
  for (int64_t v = 0; v < V; v += 7) at(3, v + 1 < V ? v + 1 : v) = kNaN;
  at(3, 2500) = 50.0f;
  // Row 4: a NaN at index 0 stands.
  at(4, 0) = kNaN;
  at(4, 10) = 50.0f;
  // Row 5: every value equal; row 6: +0 and -0 only, -0 first.
  for (int64_t v = 0; v < V; ++v) {
    at(5, v) = 1.0f;
    at(6, v) = v % 2 ? 0.0f : -0.0f;
  }
  check_add_argmax(n, V, x, bias, "ties");
  // Ties made by the bias: equal sums of different addends.
  std::vector<float> y(static_cast<size_t>(V), 1.0f), b(static_cast<size_t>(V), 0.0f);
  y[100] = 3.0f;
  y[900] = 1.0f;
  b[900] = 2.0f;
  check_add_argmax(1, V, y, b, "bias ties");
}

TEST_F(CudaTokenOpsTest, EmbedRowsMatchesTheReference) {
  const int64_t vocab = 300, d = 96, n = 5;
  std::vector<uint16_t> table(static_cast<size_t>(vocab * d));
  const std::vector<float> values = random_bf16(table.size(), 4);
  for (size_t i = 0; i < table.size(); ++i) table[i] = f32_to_bf16(values[i]);
  Pair t = both(DType::BF16, Shape{vocab, d}, table);
  Pair ids = both(DType::I32, Shape{n}, std::vector<int32_t>{299, 0, 17, 17, 150});
  Tensor rows_gpu = gpu_poisoned(DType::F32, Shape{n, d});
  Tensor rows_cpu = cpu().alloc(DType::F32, Shape{n, d});
  gpu().embed_rows(t.gpu, ids.gpu, rows_gpu);
  cpu().embed_rows(t.cpu, ids.cpu, rows_cpu);
  expect_identical(from_gpu<float>(rows_gpu), from_cpu<float>(rows_cpu), "embed_rows");
  // An id outside the table: NaN rows (the reference fails its check; the device cannot check).
  Pair bad = both(DType::I32, Shape{1}, std::vector<int32_t>{300});
  Tensor row = gpu().alloc(DType::F32, Shape{1, d});
  gpu().embed_rows(t.gpu, bad.gpu, row);
  for (float v : from_gpu<float>(row)) EXPECT_TRUE(std::isnan(v));
}

TEST_F(CudaTokenOpsTest, ConcatColumnsMatchesTheReference) {
  const int64_t n = 5, a = 256, b = 64;
  Pair left = both_f32(Shape{n, a}, random_bf16(static_cast<size_t>(n * a), 5));
  Pair right = both_f32(Shape{n, b}, random_bf16(static_cast<size_t>(n * b), 6));
  Tensor out_gpu = gpu_poisoned(DType::F32, Shape{n, a + b});
  Tensor out_cpu = cpu().alloc(DType::F32, Shape{n, a + b});
  gpu().concat_columns(left.gpu, right.gpu, out_gpu);
  cpu().concat_columns(left.cpu, right.cpu, out_cpu);
  expect_identical(from_gpu<float>(out_gpu), from_cpu<float>(out_cpu), "concat_columns");
}

}  // namespace
}  // namespace flashdesk::test
