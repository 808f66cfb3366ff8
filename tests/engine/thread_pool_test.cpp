// The CPU backends' thread pool: every index visited exactly once, in contiguous ranges.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
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

// Thousands of tiny loops back to back (the workers stay spinning), loops that use fewer parts
// than there are threads (the idle workers must still acknowledge them before the next job is
// written), and pauses longer than the spin (the workers sleep and must be woken).
TEST(ThreadPool, BackToBackTinyLoopsAndPausesNeitherLoseNorRepeatWork) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(8);
  int64_t expected = 0;
  for (int rep = 0; rep < 20000; ++rep) {
    const int64_t n = 1 + rep % 8;  // 1..8 indices: 1 to 4 parts
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    expected += n;
    if (rep % 5000 == 4999) std::this_thread::sleep_for(ThreadPool::kSpin * 5);
  }
  int64_t total = 0;
  for (auto& h : hits) total += h.load();
  EXPECT_EQ(total, expected);
  for (int64_t i = 0; i < 8; ++i)  // index i is in every loop with n > i
    EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 20000 / 8 * (8 - i)) << i;
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
