// The optimised backend's buffer cache: size classes, reuse of a freed buffer of the same class,
// the byte budget, and buffers that outlive the pool's owner.
#include <gtest/gtest.h>

#include "engine/ops/cpu_opt/buffer_pool.h"
#include "engine/ops/cpu_opt/cpu_opt_backend.h"

namespace flashdesk {
namespace {

TEST(BufferPoolTest, SizeClassesAreQuarterPowersOfTwo) {
  EXPECT_EQ(BufferPool::capacity_for(1), 256u);
  EXPECT_EQ(BufferPool::capacity_for(256), 256u);
  EXPECT_EQ(BufferPool::capacity_for(257), 320u);  // 256 + 64
  EXPECT_EQ(BufferPool::capacity_for(1024), 1024u);
  EXPECT_EQ(BufferPool::capacity_for(1025), 1280u);  // 1024 + 256
  EXPECT_EQ(BufferPool::capacity_for(1792), 1792u);
  EXPECT_EQ(BufferPool::capacity_for(1793), 2048u);
  for (size_t b : {300u, 5000u, 1u << 20, (1u << 20) + 1, 12345678u}) {
    EXPECT_GE(BufferPool::capacity_for(b), b);
    EXPECT_LE(BufferPool::capacity_for(b), b + b / 4);
  }
}

TEST(BufferPoolTest, FreedBuffersAreReusedWithinTheBudget) {
  auto pool = BufferPool::create(4096);
  uint8_t* first = nullptr;
  {
    auto m = pool->allocate(1000);
    first = m->address();
    EXPECT_EQ(m->bytes(), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  EXPECT_EQ(pool->cached_bytes(), 1024u);
  auto again = pool->allocate(900);  // same class (1024): the same buffer
  EXPECT_EQ(again->address(), first);
  EXPECT_EQ(pool->cached_bytes(), 0u);
  { auto big = pool->allocate(8000); }  // over the budget: released, not cached
  EXPECT_EQ(pool->cached_bytes(), 0u);
}

TEST(BufferPoolTest, TensorsOutliveTheBackendThatMadeThem) {
  Tensor t;
  {
    CpuOptimizedBackend be(1, CpuIsa::Scalar);
    t = be.alloc(DType::F32, Shape{4, 8});
    t.data<float>()[31] = 2.5f;
  }
  EXPECT_EQ(t.data<float>()[31], 2.5f);  // the pool lives on with the tensor
}

}  // namespace
}  // namespace flashdesk
