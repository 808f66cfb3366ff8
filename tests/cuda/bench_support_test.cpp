// The benchmarks' plain reads (cuda_bench::read_spans, the reference cuda_gemv_bench sets beside
// each op, and read_phases, the same in phases): every whole 16-byte chunk of every span read
// once, whatever the grid and the loads in flight, checked through the XOR of the words its warps
// leave in the sink.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "engine/ops/cuda/bench_support.h"
#include "engine/ops/cuda/device_context.h"
#include "tests/cuda/cuda_test_util.h"

namespace flashdesk {
namespace {

class CudaReadSpansTest : public test::CudaOpTest {
 protected:
  // Spans of odd sizes (a tail past the last whole 16 bytes), one shorter than a chunk, and
  // enough of them that a thread's loads cross from span to span; `expected` gets the XOR of
  // their whole chunks' words.
  std::vector<cuda_bench::ReadSpan> random_spans(uint32_t& expected) {
    const std::vector<size_t> sizes = {16, 4096 + 7, 5, 160'000, 48, 1'000'016, 333, 70'000 + 12};
    std::mt19937 rng(5);
    std::vector<cuda_bench::ReadSpan> spans;
    expected = 0;
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
      tensors_.push_back(t);
    }
    return spans;
  }
  // The XOR of the sink's words after `read` (the sink zeroed first).
  uint32_t sink_xor(Tensor& sink, const std::function<void()>& read) {
    std::vector<int32_t> words(static_cast<size_t>(sink.numel()), 0);
    gpu().write(sink, words.data(), words.size() * 4);
    read();
    gpu().read(sink, words.data(), words.size() * 4);
    uint32_t got = 0;
    for (const int32_t w : words) got ^= static_cast<uint32_t>(w);
    return got;
  }

 private:
  std::vector<Tensor> tensors_;
};

TEST_F(CudaReadSpansTest, ReadsEveryWholeChunkOfEverySpanOnce) {
  uint32_t expected = 0;
  const std::vector<cuda_bench::ReadSpan> spans = random_spans(expected);
  Tensor sink = cuda_bench::read_spans_sink(gpu());
  for (const int blocks_per_sm : {1, 4, 8})
    for (const int in_flight : {4, 8, 16})
      EXPECT_EQ(
          sink_xor(sink,
                   [&] { cuda_bench::read_spans(gpu(), spans, sink, in_flight, blocks_per_sm); }),
          expected)
          << blocks_per_sm << " blocks a multiprocessor, " << in_flight << " loads a thread";
}

// In phases (one span, two, the rest), every chunk is read once, every item of every phase is
// counted done once, and the ticket ends at the items plus one a block.
TEST_F(CudaReadSpansTest, PhasesReadEveryChunkOnceAndCountEveryItem) {
  uint32_t expected = 0;
  const std::vector<cuda_bench::ReadSpan> spans = random_spans(expected);
  const std::vector<std::vector<cuda_bench::ReadSpan>> phases = {
      {spans[0]}, {spans[1], spans[2]}, {spans.begin() + 3, spans.end()}};
  Tensor sink = cuda_bench::read_spans_sink(gpu());
  Tensor counters = cuda_bench::read_phases_counters(gpu());
  const int64_t sms = gpu().context().multiprocessors();
  for (const int blocks_per_sm : {1, 8})
    for (const int in_flight : {4, 16}) {
      EXPECT_EQ(sink_xor(sink,
                         [&] {
                           cuda_bench::read_phases(gpu(), phases, sink, counters, in_flight,
                                                   blocks_per_sm);
                         }),
                expected)
          << blocks_per_sm << " blocks a multiprocessor, " << in_flight << " loads a thread";
      std::vector<int32_t> count(static_cast<size_t>(counters.numel()));
      gpu().read(counters, count.data(), count.size() * 4);
      const int64_t item_bytes = int64_t{in_flight} * 256 * 16;
      int64_t items = 0;
      for (size_t p = 0; p < phases.size(); ++p) {
        int64_t bytes = 0;
        for (const cuda_bench::ReadSpan& s : phases[p])
          bytes += static_cast<int64_t>(s.bytes / 16 * 16);
        const int64_t phase_items = (bytes + item_bytes - 1) / item_bytes;
        EXPECT_EQ(count[1 + p], phase_items) << "phase " << p;
        items += phase_items;
      }
      EXPECT_EQ(count[0], items + blocks_per_sm * sms);
      for (size_t p = phases.size(); p + 1 < count.size(); ++p) EXPECT_EQ(count[1 + p], 0);
    }
}

}  // namespace
}  // namespace flashdesk
