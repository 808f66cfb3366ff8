// The CPU backends' thread pool: every index visited exactly once, in contiguous ranges.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "engine/ops/cpu/thread_pool.h"

namespace flashdesk {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    for (int rep = 0; rep < 3; ++rep)
      pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
        ASSERT_LE(b, e);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
    for (auto& h : hits) EXPECT_EQ(h.load(), 3);
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.parallel_for(10, 1, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace flashdesk
