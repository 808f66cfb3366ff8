// The benchmarks' plain read (cuda_bench::read_spans, the reference cuda_gemv_bench sets beside
// each op): every whole 16-byte chunk of every span read once, whatever the grid and the loads in
// flight, checked through the XOR of the words its warps leave in the sink.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/ops/cuda/bench_support.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk {
namespace {

class CudaReadSpansTest : public test::CudaOpTest {};

TEST_F(CudaReadSpansTest, ReadsEveryWholeChunkOfEverySpanOnce) {
  // Spans of odd sizes (a tail past the last whole 16 bytes), one shorter than a chunk, and
  // enough of them that a thread's loads cross from span to span.
  const std::vector<size_t> sizes = {16, 4096 + 7, 5, 160'000, 48, 1'000'016, 333, 70'000 + 12};
  std::mt19937 rng(5);
  std::vector<Tensor> tensors;
  std::vector<cuda_bench::ReadSpan> spans;
  uint32_t expected = 0;
  for (const size_t bytes : sizes) {
    std::vector<uint8_t> host(bytes);
    for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
    Tensor t = gpu().alloc(DType::U8, Shape{static_cast<int64_t>(bytes)});
    gpu().write(t, host.data(), bytes);
    for (size_t w = 0; w + 4 <= bytes / 16 * 16; w += 4)
      expected ^= static_cast<uint32_t>(host[w]) | static_cast<uint32_t>(host[w + 1]) << 8 |
                  static_cast<uint32_t>(host[w + 2]) << 16 |
                  static_cast<uint32_t>(host[w + 3]) << 24;
    spans.push_back({t.bytes(), bytes});
    tensors.push_back(t);
  }
  Tensor sink = cuda_bench::read_spans_sink(gpu());
  for (const int blocks_per_sm : {1, 4, 8})
    for (const int in_flight : {4, 8, 16}) {
      std::vector<int32_t> zeros(static_cast<size_t>(sink.numel()), 0);
      gpu().write(sink, zeros.data(), zeros.size() * 4);
      cuda_bench::read_spans(gpu(), spans, sink, in_flight, blocks_per_sm);
      std::vector<int32_t> words(zeros.size());
      gpu().read(sink, words.data(), words.size() * 4);
      uint32_t got = 0;
      for (const int32_t w : words) got ^= static_cast<uint32_t>(w);
      EXPECT_EQ(got, expected) << blocks_per_sm << " blocks a multiprocessor, " << in_flight
                               << " loads a thread";
    }
}

}  // namespace
}  // namespace flashdesk
