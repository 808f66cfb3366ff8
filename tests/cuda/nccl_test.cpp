// NCCL all-reduces between CUDA backends (make_nccl_collectives, nccl_collective.cpp): one rank on
// the one lent GPU (world 1: the sum is the tensor itself, through NCCL on the backend's stream),
// two ranks where the machine has two GPUs, and the requests refused before NCCL is touched.
// Skipped without a GPU, and on the CPU emulation, which has no NCCL.
#include <thread>

#include "engine/util/error.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (emulated()) GTEST_SKIP() << "NCCL runs on a GPU; the CPU emulation has none";
    if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }

  static std::vector<float> random_values(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng);
    return v;
  }
  static Tensor on(Backend& be, const std::vector<float>& v) {
    Tensor t = be.alloc(DType::F32, Shape{static_cast<int64_t>(v.size())});
    be.write(t, v.data(), v.size() * sizeof(float));
    return t;
  }
  static std::vector<float> back(Backend& be, const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    be.read(t, v.data(), v.size() * sizeof(float));
    return v;
  }
};

TEST_F(NcclTest, OneRankSumsToItsOwnTensor) {
  CudaBackend be(0);
  auto comms = make_nccl_collectives({&be});
  ASSERT_EQ(comms.size(), 1u);
  EXPECT_EQ(comms[0]->rank(), 0);
  EXPECT_EQ(comms[0]->world(), 1);
  // About the sizes one decode step reduces (a row of 5120) and a prefill's (many rows).
  for (const int64_t n : {int64_t{5120}, int64_t{8 * 5120 + 7}}) {
    const std::vector<float> want = random_values(n, 7);
    Tensor t = on(be, want);
    comms[0]->all_reduce_sum(t);
    EXPECT_EQ(back(be, t), want) << n;
  }
}

TEST_F(NcclTest, TwoRanksOnTwoGpusSum) {
  if (cuda_devices().size() < 2) GTEST_SKIP() << "needs two GPUs (this machine has one)";
  CudaBackend a(0), b(1);
  auto comms = make_nccl_collectives({&a, &b});
  const std::vector<float> va = random_values(5120, 1), vb = random_values(5120, 2);
  Tensor ta = on(a, va), tb = on(b, vb);
  std::thread other([&] { comms[1]->all_reduce_sum(tb); });
  comms[0]->all_reduce_sum(ta);
  other.join();
  std::vector<float> want(va.size());
  for (size_t i = 0; i < va.size(); ++i) want[i] = va[i] + vb[i];
  EXPECT_EQ(back(a, ta), want);
  EXPECT_EQ(back(b, tb), want);
}

TEST_F(NcclTest, RanksNeedCudaBackendsOnGpusOfTheirOwn) {
  CudaBackend be(0), again(0);
  try {
    make_nccl_collectives({&be, &again});
    ADD_FAILURE() << "one GPU given twice was accepted";
  } catch (const InvalidRequest& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0 is given twice"), std::string::npos) << e.what();
  }
  CpuReferenceBackend cpu(1);
  EXPECT_THROW(make_nccl_collectives({&cpu}), InvalidRequest);
}

}  // namespace
}  // namespace flashdesk::test
