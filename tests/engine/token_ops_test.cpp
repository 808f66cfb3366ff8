// The token ops of the backend interface (embed_rows, add_argmax, concat_columns) on every CPU
// backend against hand-computed values: the argmax keeps std::max_element's rule (first maximum,
// NaN never wins except at index 0), the sums are the FP32 sums, the copies exact.
#include <algorithm>
#include <limits>

#include "tests/engine/backend_test_util.h"

namespace flashdesk::test {
namespace {

class TokenOpsTest : public BackendTest {
 protected:
  // add_argmax over one row: the chosen id, and the row left in place.
  int32_t argmax_of(const std::vector<float>& row, const std::vector<float>& bias,
                    std::vector<float>* sums = nullptr) {
    const int64_t V = static_cast<int64_t>(row.size());
    Tensor x = f32(Shape{1, V}, row), b = f32(Shape{1, V}, bias);
    Tensor ids = be().alloc(DType::I32, Shape{1});
    be().add_argmax(x, b, ids);
    if (sums) *sums = host<float>(x);
    return host<int32_t>(ids)[0];
  }
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST_P(TokenOpsTest, AddArgmaxAddsInPlaceAndTakesTheFirstMaximum) {
  std::vector<float> sums;
  EXPECT_EQ(argmax_of({1, 5, 2, 5}, {0, 0, 4, 0}, &sums), 2);
  EXPECT_EQ(sums, (std::vector<float>{1, 5, 6, 5}));
  EXPECT_EQ(argmax_of({1, 5, 2, 5}, {0, 0, 3, 0}), 1);         // a tie made by the bias
  EXPECT_EQ(argmax_of({1, 5, 2, 5}, {0, 0, 0, 0}), 1);         // tie: the lower index
  EXPECT_EQ(argmax_of({3, 3, 3}, {0, 0, 0}), 0);               // all equal
  EXPECT_EQ(argmax_of({-0.0f, 0.0f}, {0, 0}), 0);              // -0 == +0: a tie
  EXPECT_EQ(argmax_of({-kInf, -kInf, -1}, {0, 0, -kInf}), 0);  // -inf everywhere
  EXPECT_EQ(argmax_of({1, kNaN, 2, kNaN}, {0, 0, 0, 0}), 2);   // NaN never wins
  EXPECT_EQ(argmax_of({kNaN, 7, 9}, {0, 0, 0}), 0);            // ... except at index 0
  EXPECT_EQ(argmax_of({kInf, 1}, {-kInf, 0}), 0);              // the sum's NaN at index 0 stands
}

TEST_P(TokenOpsTest, AddArgmaxMatchesMaxElementOnManyRows) {
  const int64_t n = 3, V = 3000;
  std::vector<float> x = bf16_values(static_cast<size_t>(n * V), 1, 4.0f);
  const std::vector<float> b = bf16_values(static_cast<size_t>(n * V), 2, 4.0f);
  x[static_cast<size_t>(V + 2999)] = 100.0f;  // row 1: the maximum last, and tied earlier
  x[static_cast<size_t>(V + 1234)] =
      100.0f - b[static_cast<size_t>(V + 1234)] + b[static_cast<size_t>(V + 2999)];
  Tensor xt = f32(Shape{n, V}, x), bt = f32(Shape{n, V}, b);
  Tensor ids = be().alloc(DType::I32, Shape{n});
  be().add_argmax(xt, bt, ids);
  const std::vector<float> got = host<float>(xt);
  const std::vector<int32_t> got_ids = host<int32_t>(ids);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> row(static_cast<size_t>(V));
    for (int64_t v = 0; v < V; ++v)
      row[static_cast<size_t>(v)] =
          x[static_cast<size_t>(i * V + v)] + b[static_cast<size_t>(i * V + v)];
    EXPECT_TRUE(std::equal(row.begin(), row.end(), got.begin() + i * V)) << "row " << i;
    EXPECT_EQ(got_ids[static_cast<size_t>(i)],
              std::max_element(row.begin(), row.end()) - row.begin())
        << "row " << i;
  }
}

TEST_P(TokenOpsTest, EmbedRowsReadsIdsFromATensor) {
  const std::vector<uint16_t> table = {f32_to_bf16(1), f32_to_bf16(2),    f32_to_bf16(-3),
                                       f32_to_bf16(4), f32_to_bf16(0.5f), f32_to_bf16(6)};
  Tensor t = make(DType::BF16, Shape{3, 2}, table);
  Tensor ids = make(DType::I32, Shape{3}, std::vector<int32_t>{2, 0, 2});
  Tensor rows = be().alloc(DType::F32, Shape{3, 2});
  be().embed_rows(t, ids, rows);
  EXPECT_EQ(host<float>(rows), (std::vector<float>{0.5f, 6, 1, 2, 0.5f, 6}));
}

TEST_P(TokenOpsTest, ConcatColumnsJoinsEachRow) {
  Tensor left = f32(Shape{2, 3}, {1, 2, 3, 4, 5, 6}), right = f32(Shape{2, 1}, {-1, -2});
  Tensor out = be().alloc(DType::F32, Shape{2, 4});
  be().concat_columns(left, right, out);
  EXPECT_EQ(host<float>(out), (std::vector<float>{1, 2, 3, -1, 4, 5, 6, -2}));
}

FD_BACKEND_TEST_SUITE(TokenOpsTest);

}  // namespace
}  // namespace flashdesk::test
