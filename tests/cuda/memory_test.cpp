// The CUDA backend's memory ops and weight uploads: bytes round-trip exactly, row gathers and
// scatters match cpu-reference, weights stay in their stored formats, and the pool reuses freed
// blocks without mixing up live ones.
#include <cstdlib>
#include <numeric>
#include <string>

#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

class CudaMemoryTest : public CudaOpTest {};

TEST_F(CudaMemoryTest, WriteReadCopyAndZeroRoundTripEveryByte) {
  const std::vector<uint8_t> bytes = random_bytes(4099, 1);
  Tensor a = gpu().alloc(DType::U8, Shape{4099});
  gpu().write(a, bytes.data(), bytes.size());
  EXPECT_EQ(from_gpu<uint8_t>(a), bytes);
  Tensor b = gpu().alloc(DType::U8, Shape{4099});
  gpu().copy(a, b);
  EXPECT_EQ(from_gpu<uint8_t>(b), bytes);
  gpu().fill_zero(b);
  EXPECT_EQ(from_gpu<uint8_t>(b), std::vector<uint8_t>(4099, 0));
  EXPECT_EQ(from_gpu<uint8_t>(a), bytes);  // the copy's source is untouched
}

// FLASHDESK_CUDA_GRAPH_RECORDS takes a whole number from 1 to 64; anything else stops the
// backend's construction with the variable named (as every FLASHDESK_CUDA_* switch does), rather
// than running with a misread count.
using CudaMemoryDeathTest = CudaMemoryTest;
TEST_F(CudaMemoryDeathTest, BadGraphRecordsCountIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* bad : {"0", "65", "4x", "", "four", "-3"}) {
    ::setenv("FLASHDESK_CUDA_GRAPH_RECORDS", bad, 1);
    EXPECT_DEATH(CudaBackend be(0), "FLASHDESK_CUDA_GRAPH_RECORDS: 1 to 64") << "'" << bad << "'";
  }
  ::setenv("FLASHDESK_CUDA_GRAPH_RECORDS", "16", 1);
  EXPECT_NO_THROW(CudaBackend be(0));
  ::unsetenv("FLASHDESK_CUDA_GRAPH_RECORDS");
}

TEST_F(CudaMemoryTest, RowViewsAddressTheirRows) {
  std::vector<float> v(6 * 5);
  std::iota(v.begin(), v.end(), 0.0f);
  Pair t = both_f32(Shape{6, 5}, v);
  Tensor rows = t.gpu.rows(2, 3);
  const std::vector<float> got = from_gpu<float>(rows);
  EXPECT_EQ(got, std::vector<float>(v.begin() + 10, v.begin() + 25));
}

// Row copies, as plain launches and inside a step graph (where the row numbers go to the device,
// row_copy.h): rows of 16-byte units (a window row of 528 bytes) and of odd sizes (single bytes).
class CudaRowCopyTest : public CudaOpTest, public ::testing::WithParamInterface<bool> {};

TEST_P(CudaRowCopyTest, GatherAndScatterRowsMatchTheReference) {
  const bool in_step = GetParam();
  gpu().set_step_graphs(in_step);
  for (const int64_t rb : {int64_t{528}, int64_t{13}}) {
    const std::vector<uint8_t> bytes = random_bytes(static_cast<size_t>(10 * rb), 2);
    Pair src = both(DType::U8, Shape{10, rb}, bytes);
    const std::vector<int64_t> rows = {3, 4, 5, 9, 0, 1, 1};  // runs, a jump, a repeat
    Pair g = both_alloc(DType::U8, Shape{7, rb});
    gpu().step_graph_begin(1);
    gpu().gather_rows(src.gpu, rows, g.gpu);
    gpu().step_graph_end();
    cpu().gather_rows(src.cpu, rows, g.cpu);
    EXPECT_EQ(from_gpu<uint8_t>(g.gpu), from_cpu<uint8_t>(g.cpu)) << rb;

    Pair dst = both(DType::U8, Shape{10, rb}, random_bytes(static_cast<size_t>(10 * rb), 3));
    const std::vector<int64_t> from = {0, 1, 2, 6}, to = {8, 9, 0, 4};  // a wrapped ring update
    gpu().step_graph_begin(1);
    gpu().scatter_rows(g.gpu, from, dst.gpu, to);
    gpu().step_graph_end();
    cpu().scatter_rows(g.cpu, from, dst.cpu, to);
    EXPECT_EQ(from_gpu<uint8_t>(dst.gpu), from_cpu<uint8_t>(dst.cpu)) << rb;
  }
  EXPECT_EQ(gpu().step_graph_counts().launches > 0, in_step);
}

INSTANTIATE_TEST_SUITE_P(PlainAndInStep, CudaRowCopyTest, ::testing::Bool(),
                         [](const auto& param_info) {
                           return param_info.param ? "InStep" : "Plain";
                         });

TEST_F(CudaMemoryTest, UploadKeepsTheStoredBytesAndUploadF32WidensExactly) {
  const std::vector<uint8_t> codes = random_bytes(64 * 96, 4);
  const std::array<int64_t, 2> shape = {64, 96};
  TensorView v{"w", DType::F8_E4M3, shape, codes.data(), codes.size()};
  Tensor t = gpu().upload(v);
  EXPECT_EQ(t.dtype(), DType::F8_E4M3);
  EXPECT_EQ(t.shape(), (Shape{64, 96}));
  EXPECT_FALSE(t.host_accessible());
  EXPECT_EQ(from_gpu<uint8_t>(t), codes);

  std::vector<uint16_t> bf(300);
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = static_cast<uint16_t>(i * 211 + 7);
  const std::array<int64_t, 1> s1 = {300};
  TensorView b{"norm", DType::BF16, s1, reinterpret_cast<const uint8_t*>(bf.data()), 600};
  const std::vector<float> got = from_gpu<float>(gpu().upload_f32(b));
  const std::vector<float> want = from_cpu<float>(cpu().upload_f32(b));
  expect_identical(got, want, "upload_f32");
}

TEST_F(CudaMemoryTest, PoolReusesFreedBlocksWithoutTouchingLiveOnes) {
  const std::vector<uint8_t> keep = random_bytes(1 << 16, 5);
  Tensor live = gpu().alloc(DType::U8, Shape{1 << 16});
  gpu().write(live, keep.data(), keep.size());
  for (int i = 0; i < 50; ++i) {  // churn: same and nearby sizes, freed at once
    Tensor t = gpu().alloc(DType::U8, Shape{(1 << 16) + i * 100});
    gpu().fill_zero(t);
  }
  EXPECT_EQ(from_gpu<uint8_t>(live), keep);
}

// A step graph (step_graph.h) keeps the order the host issued: a host buffer overwritten after
// its write() was issued still gives the old values (staged), a beside section's work is joined,
// a read inside the step sees the work before it (the step is cut there), and the work after the
// cut runs. The first step is captured; the steps after it issue the same ops with new host
// values and are replayed with those values.
TEST_F(CudaMemoryTest, StepGraphsKeepTheIssuedOrderAcrossBesideSectionsAndReads) {
  gpu().set_step_graphs(true);
  const int64_t n = 1000;
  Tensor a = gpu().alloc(DType::F32, Shape{n}), b = gpu().alloc(DType::F32, Shape{n});
  Tensor c = gpu().alloc(DType::F32, Shape{n});
  for (int round = 0; round < 4; ++round) {
    std::vector<float> v = random_bf16(n, 40 + round);
    const std::vector<float> first = v;
    gpu().step_graph_begin(1);
    gpu().write(a, v.data(), v.size() * sizeof(float));
    for (float& x : v) x += 1.0f;  // after the write was issued, before the graph runs
    gpu().beside_begin();
    gpu().copy(a, b);
    const Backend::Beside section = gpu().beside_end();
    gpu().join(section);
    gpu().scale(b, 2.0f);
    const std::vector<float> doubled = from_gpu<float>(b);  // a read inside the step: a cut
    gpu().write(a, v.data(), v.size() * sizeof(float));
    gpu().copy(a, c);
    gpu().step_graph_end();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(doubled[i], 2.0f * first[i]) << round << " " << i;
    EXPECT_EQ(from_gpu<float>(c), v) << round;
  }
  const cuda::StepGraphCounts& counts = gpu().step_graph_counts();
  EXPECT_EQ(counts.launches, 8u);  // two parts a step
  EXPECT_EQ(counts.instantiations, 2u);
  EXPECT_EQ(counts.replays, 6u);
  EXPECT_EQ(counts.replay_stops, 0u);
}

// A step whose ops differ from the recorded ones (here one more kernel, then other factors) stops
// its replay at the first difference and is captured from its start, the ops matched so far issued
// again into the capture: every step's result is its own. The captures are kept as new records
// while the step has room for them (four), so that steps which alternate find theirs again; then
// the least recently used record of the same topology is updated in place.
TEST_F(CudaMemoryTest, StepGraphsCaptureAStepThatDiffersFromTheRecord) {
  gpu().set_step_graphs(true);
  const int64_t n = 300;
  Tensor a = gpu().alloc(DType::F32, Shape{n});
  const float factors[8] = {2.0f, 2.0f, 2.0f, 2.0f, 2.0f, 4.0f, 8.0f, 16.0f};
  for (int round = 0; round < 8; ++round) {
    const std::vector<float> v = random_bf16(n, 60 + round);
    gpu().step_graph_begin(1);
    gpu().write(a, v.data(), v.size() * sizeof(float));
    gpu().scale(a, factors[round]);
    if (round == 4) gpu().scale(a, 0.5f);
    gpu().step_graph_end();
    const std::vector<float> got = from_gpu<float>(a);
    const float f = round == 4 ? 1.0f : factors[round];
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], f * v[i]) << round << " " << i;
  }
  const cuda::StepGraphCounts& counts = gpu().step_graph_counts();
  EXPECT_EQ(counts.launches, 8u);
  EXPECT_EQ(counts.replays, 3u);         // rounds 1 to 3
  EXPECT_EQ(counts.replay_stops, 4u);    // round 4 at its extra kernel, 5 to 7 at their factors
  EXPECT_EQ(counts.instantiations, 4u);  // rounds 0, 4, 5 and 6: the step's four records
  EXPECT_EQ(counts.updates, 1u);         // round 7's graph: round 0's, the least recently used
  EXPECT_STREQ(counts.last_stop, "cuda::scale_kernel");
}

// A step launched in parts of two layers (set_step_graph_part_layers; the model marks each layer's
// end with step_graph_layer_done): three graphs a step of five layers, each replayed on its own;
// an extra op in one layer stops the replay of that layer's part only.
TEST_F(CudaMemoryTest, StepGraphsLaunchAPartEveryFewLayers) {
  gpu().set_step_graphs(true);
  gpu().set_step_graph_part_layers(2);
  const int64_t n = 500;
  Tensor a = gpu().alloc(DType::F32, Shape{n});
  for (int round = 0; round < 5; ++round) {
    const std::vector<float> v = random_bf16(n, 80 + round);
    gpu().step_graph_begin(1);
    gpu().write(a, v.data(), v.size() * sizeof(float));
    for (int layer = 0; layer < 5; ++layer) {
      gpu().scale(a, 2.0f);
      if (round == 4 && layer == 2) gpu().scale(a, 0.5f);
      gpu().step_graph_layer_done();
    }
    gpu().step_graph_end();
    const std::vector<float> got = from_gpu<float>(a);
    const float f = round == 4 ? 16.0f : 32.0f;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], f * v[i]) << round << " " << i;
  }
  const cuda::StepGraphCounts& counts = gpu().step_graph_counts();
  EXPECT_EQ(counts.launches, 15u);       // layers 0-1, 2-3 and 4: three parts a step
  EXPECT_EQ(counts.instantiations, 4u);  // round 0's three parts, round 4's second part
  EXPECT_EQ(counts.replays, 11u);        // rounds 1 to 3, and round 4's first and last parts
  EXPECT_EQ(counts.replay_stops, 1u);
}

TEST_F(CudaMemoryTest, BackendNamesItsDevice) {
  EXPECT_EQ(gpu().name(), "cuda:0");
  EXPECT_FALSE(gpu().device().name.empty());
  EXPECT_GT(gpu().device().total_bytes, size_t{0});
}

}  // namespace
}  // namespace flashdesk::test
