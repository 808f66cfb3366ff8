// The DRAM window pool: exact-prefix lookups, TTL, LRU under a byte budget, thread safety.
#include "storage/window_pool.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

using testing::ManualClock;

WindowKey key(int64_t session, int64_t tokens, std::string_view prefix = "p") {
  return {session, tokens, xxh3_128(as_bytes(prefix))};
}

std::vector<uint8_t> bytes(size_t n, uint8_t fill = 1) {
  return std::vector<uint8_t>(n, fill);
}

TEST(WindowPool, FindsASnapshotOnlyForItsExactPrefix) {
  ManualClock clock;
  WindowPool pool({.budget_bytes = 1 << 20, .clock = clock.clock()});
  ASSERT_TRUE(pool.park(key(1, 300, "abc"), bytes(100, 7)));
  const auto hit = pool.find(key(1, 300, "abc"));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->bytes, bytes(100, 7));
  EXPECT_FALSE(pool.find(key(1, 300, "abd")));  // the conversation was edited
  EXPECT_FALSE(pool.find(key(1, 301, "abc")));
  EXPECT_FALSE(pool.find(key(2, 300, "abc")));
  const WindowPoolStats s = pool.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 3);
  EXPECT_EQ(s.entries, 1);
  EXPECT_EQ(s.bytes, 100u);
}

TEST(WindowPool, EntriesExpireTtlAfterTheirLastUse) {
  ManualClock clock;
  WindowPool pool(
      {.budget_bytes = 1 << 20, .ttl = std::chrono::minutes(10), .clock = clock.clock()});
  pool.park(key(1, 10), bytes(10));
  pool.park(key(2, 10), bytes(10));
  clock.advance_ms(9 * 60 * 1000);
  EXPECT_TRUE(pool.find(key(1, 10)));  // used: its ten minutes start again
  clock.advance_ms(2 * 60 * 1000);
  EXPECT_FALSE(pool.find(key(2, 10)));  // 11 minutes unused
  EXPECT_TRUE(pool.find(key(1, 10)));
  clock.advance_ms(10 * 60 * 1000);
  EXPECT_EQ(pool.expire(), 1);
  EXPECT_EQ(pool.stats().entries, 0);
  EXPECT_EQ(pool.stats().expired, 2);
}

TEST(WindowPool, EvictsLeastRecentlyUsedToStayWithinBudget) {
  ManualClock clock;
  WindowPool pool({.budget_bytes = 300, .clock = clock.clock()});
  pool.park(key(1, 1), bytes(100));
  pool.park(key(2, 1), bytes(100));
  pool.park(key(3, 1), bytes(100));
  EXPECT_TRUE(pool.find(key(1, 1)));  // 2 is now the least recently used
  pool.park(key(4, 1), bytes(150));   // needs 50 more bytes than free: 2 goes, then 3
  EXPECT_TRUE(pool.find(key(1, 1)));
  EXPECT_FALSE(pool.find(key(2, 1)));
  EXPECT_FALSE(pool.find(key(3, 1)));
  EXPECT_TRUE(pool.find(key(4, 1)));
  EXPECT_EQ(pool.stats().bytes, 250u);
  EXPECT_EQ(pool.stats().evicted, 2);
  EXPECT_FALSE(pool.park(key(5, 1), bytes(301)));  // larger than the whole budget
}

TEST(WindowPool, ReplacesASlotAndListsTheSessionsTokenCounts) {
  WindowPool pool({.budget_bytes = 1000});
  pool.park(key(7, 100, "a"), bytes(10, 1));
  pool.park(key(7, 250, "b"), bytes(10, 2));
  pool.park(key(8, 999, "c"), bytes(10, 3));
  pool.park(key(7, 100, "a2"), bytes(20, 4));  // same slot, newer prefix
  EXPECT_EQ(pool.token_counts(7), (std::vector<int64_t>{250, 100}));
  EXPECT_FALSE(pool.find(key(7, 100, "a")));
  EXPECT_EQ(pool.find(key(7, 100, "a2"))->bytes, bytes(20, 4));
  EXPECT_EQ(pool.stats().bytes, 40u);
  pool.drop_session(7);
  EXPECT_TRUE(pool.token_counts(7).empty());
  EXPECT_EQ(pool.token_counts(8), (std::vector<int64_t>{999}));
}

TEST(WindowPool, AHeldSnapshotOutlivesItsEviction) {
  WindowPool pool({.budget_bytes = 100});
  pool.park(key(1, 1), bytes(100, 9));
  const auto held = pool.find(key(1, 1));
  pool.park(key(2, 1), bytes(100));  // evicts the held one from the pool
  EXPECT_FALSE(pool.find(key(1, 1)));
  EXPECT_EQ(held->bytes, bytes(100, 9));
}

// /proc/meminfo is an independent reading of the machine's memory.
TEST(WindowPool, DefaultBudgetIsATenthOfPhysicalMemory) {
  std::ifstream meminfo("/proc/meminfo");
  std::string label;
  uint64_t kib = 0;
  meminfo >> label >> kib;
  ASSERT_EQ(label, "MemTotal:");
  const double expected = static_cast<double>(kib) * 1024 / 10;
  EXPECT_NEAR(static_cast<double>(WindowPool::default_budget_bytes()), expected, expected * 0.02);
  EXPECT_EQ(WindowPool().stats().budget_bytes, WindowPool::default_budget_bytes());
}

TEST(WindowPool, ParallelParksAndFindsStayConsistent) {
  WindowPool pool({.budget_bytes = 64 * 1000});
  std::vector<std::thread> threads;
  std::atomic<int64_t> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const int64_t session = t * 100 + i % 50;
        pool.park(key(session, i % 7), bytes(1000, static_cast<uint8_t>(session)));
        if (auto s = pool.find(key(session, (i + 3) % 7)))
          if (s->bytes != bytes(1000, static_cast<uint8_t>(session))) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  const WindowPoolStats s = pool.stats();
  EXPECT_LE(s.bytes, 64u * 1000);
  EXPECT_EQ(s.bytes, static_cast<uint64_t>(s.entries) * 1000);
}

}  // namespace
}  // namespace flashdesk::storage
