// The launch overlap (programmatic dependent launch, cuda_compat.cuh) keeps the issued order where
// the beside lane joins the main stream: a kernel after the join reads what both streams' writers
// wrote, whichever of them finishes last, launched plainly or as a step graph. In step graphs a
// kernel after a join launched with the overlap did not wait for both (the goldens' decode steps
// went wrong, 2026-12-06); FLASHDESK_CUDA_PDL=acrosswaits brings that back, for the benchmarks.
// The bookkeeping behind it, the mark an event wait leaves, is checked on the host.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "engine/ops/cuda/join_order_probe.h"
#include "engine/ops/cuda/launch_overlap.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk::test {
namespace {

// The mark an event wait leaves on its stream: the next launch there, and only that one, goes
// without the overlap (launch_overlap.h). Host bookkeeping only: runs without a GPU.
TEST(LaunchOverlapMarks, OnlyTheLaunchAfterAnEventWaitGoesPlain) {
  const char* pdl = std::getenv("FLASHDESK_CUDA_PDL");
  if (pdl && std::strcmp(pdl, "acrosswaits") == 0)
    GTEST_SKIP() << "FLASHDESK_CUDA_PDL=acrosswaits leaves no marks";
  const auto s1 = reinterpret_cast<cudaStream_t>(uintptr_t{0x100});
  const auto s2 = reinterpret_cast<cudaStream_t>(uintptr_t{0x200});
  EXPECT_FALSE(cuda::take_event_wait(s1));
  cuda::note_event_wait(s1);
  cuda::note_event_wait(s1);  // two waits in a row leave one mark
  cuda::note_event_wait(s2);
  EXPECT_TRUE(cuda::take_event_wait(s2));
  EXPECT_FALSE(cuda::take_event_wait(s2));
  EXPECT_TRUE(cuda::take_event_wait(s1));
  EXPECT_FALSE(cuda::take_event_wait(s1));
}

class CudaLaunchOrderTest : public CudaOpTest,
                            public ::testing::WithParamInterface<std::tuple<JoinShape, bool>> {};

TEST_P(CudaLaunchOrderTest, EveryReaderWaitsForWhatItReads) {
  const auto [shape, graph] = GetParam();
  EXPECT_EQ(join_order_probe_wrong_values(gpu(), shape, graph, emulated() ? 2 : 20), 0);
}

std::string join_case_name(const ::testing::TestParamInfo<std::tuple<JoinShape, bool>>& p) {
  static const char* const names[] = {"JoinSlowMain", "JoinSlowLane", "SecondSectionSlowMain",
                                      "FirstSectionSlowMain", "JoinSlowMainOneBlockReader"};
  return std::string(names[static_cast<int>(std::get<0>(p.param))]) +
         (std::get<1>(p.param) ? "Graph" : "Plain");
}

INSTANTIATE_TEST_SUITE_P(
    PlainAndInStep, CudaLaunchOrderTest,
    ::testing::Combine(::testing::Values(JoinShape::JoinSlowMain, JoinShape::JoinSlowLane,
                                         JoinShape::SecondSectionSlowMain,
                                         JoinShape::FirstSectionSlowMain,
                                         JoinShape::JoinSlowMainOneBlockReader),
                       ::testing::Bool()),
    join_case_name);

}  // namespace
}  // namespace flashdesk::test
