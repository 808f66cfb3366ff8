// Device-side random fills, stream timing and the copy / GEMM ceilings of bench_support.h.
#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/ops/cuda/bench_support.h"
#include "engine/ops/cuda/device_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/ops/kv_format.h"

namespace flashdesk::cuda_bench {
namespace {

using cuda::blocks_for;
using cuda::ptr;

__device__ uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ float unit(uint64_t h) {  // [0, 1)
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// Byte i of a cache row of `dim` values in format f: codes first, then the scales.
__device__ uint8_t cache_byte(KvFormat f, int64_t dim, int64_t i, uint64_t h, int64_t centre) {
  const int64_t row = kv_row_bytes(f, dim), j = i % row, codes = kv_code_bytes(f, dim);
  if (j < codes) {
    uint8_t b = static_cast<uint8_t>(h);
    if (f == KvFormat::Fp8Window && (b & 0x7F) == 0x7F) b ^= 1;
    return b;
  }
  if (f == KvFormat::Fp4Entry) return static_cast<uint8_t>(0x1C + (h >> 8) % 8);  // E4M3 ~0.1
  return static_cast<uint8_t>(127 + centre + static_cast<int>((h >> 8) % 5) - 2);
}

__device__ void fill_one(uint8_t* out, int64_t e, const FillSpec& s) {
  const uint64_t h = mix(s.seed * 0x100000001B3ull + static_cast<uint64_t>(e));
  switch (s.kind) {
    case Fill::Fp8Codes: {
      uint8_t b = static_cast<uint8_t>(h);
      out[e] = (b & 0x7F) == 0x7F ? b ^ 1 : b;
      break;
    }
    case Fill::E8m0Scales:
      out[e] = static_cast<uint8_t>(127 + s.centre + static_cast<int>(h % 5) - 2);
      break;
    case Fill::RandomBytes:
      out[e] = static_cast<uint8_t>(h);
      break;
    case Fill::Bf16: {
      const uint16_t bits = cuda::f32_to_bf16_bits(s.lo + (s.hi - s.lo) * unit(h));
      reinterpret_cast<uint16_t*>(out)[e] = bits;
      break;
    }
    case Fill::F32:
      reinterpret_cast<float*>(out)[e] = s.lo + (s.hi - s.lo) * unit(h);
      break;
    case Fill::Bf16InF32:
      reinterpret_cast<float*>(out)[e] = cuda::round_bf16(s.lo + (s.hi - s.lo) * unit(h));
      break;
    case Fill::WindowRows:
      out[e] = cache_byte(KvFormat::Fp8Window, s.dim, e, h, s.centre);
      break;
    case Fill::EntryRows:
      out[e] = cache_byte(KvFormat::Fp4Entry, s.dim, e, h, s.centre);
      break;
    case Fill::KeyRows:
      out[e] = cache_byte(KvFormat::Fp4Key, s.dim, e, h, s.centre);
      break;
  }
}

// Grid-stride over the elements (a fixed grid: one launch fills gigabytes).
__global__ void fill_kernel(uint8_t* out, int64_t n_bytes, int64_t elem, FillSpec s) {
  FD_GRID_PROLOGUE();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e * elem < n_bytes;
       e += stride)
    fill_one(out, e, s);
}

// Spins until `ns` nanoseconds of the device's clock have passed: holds the stream (its wait is
// not a dependency the next launch may start before: it never lets dependents launch early). It
// starts its clock once the kernel before it has finished, as every kernel waits for its
// predecessor (tests/tools/cuda_grid_wait_test.py).
__global__ void hold_stream_kernel(int64_t ns) {
  fd_wait_prior_grid();
#ifndef FLASHDESK_CUDA_EMU
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<int64_t>(now - start) < ns);
#else
  (void)ns;
#endif
}

constexpr int kMaxReadSpans = 64;
constexpr int kReadThreads = 256, kReadWarps = kReadThreads / 32;
constexpr int64_t kMaxReadBlocksPerSm = 8;
struct ReadSpanTable {
  const uint4* data[kMaxReadSpans];
  int64_t ends[kMaxReadSpans];  // each span's end in the spans' joint run of 16-byte chunks
  int count;
  int padding;
};
constexpr int kMaxReadPhases = 16;
struct ReadPhaseTable {
  ReadSpanTable spans;                // every phase's spans, one joint run
  int64_t end_chunk[kMaxReadPhases];  // each phase's end in that run
  int64_t end_item[kMaxReadPhases];   // each phase's end in items (cumulative)
  int phases;
  int padding;
};

// Chunk j of the spans' joint run: its span by binary search over the ends.
__device__ const uint4* joint_chunk(const uint4* const* data, const int64_t* ends, int count,
                                    int64_t j) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (j < ends[mid])
      hi = mid;
    else
      lo = mid + 1;
  }
  return data[lo] + (j - (lo == 0 ? 0 : ends[lo - 1]));
}

// The spans as one run of chunks, grid-stride, kInFlight loads issued a thread before they are
// used: every thread reads from every span at once (a loop span by span left each span's last
// round to a few threads, a tail a span).
template <int kInFlight>
__global__ void read_spans_kernel(ReadSpanTable t, uint32_t* sink) {
  FD_GRID_PROLOGUE();
  __shared__ const uint4* data[kMaxReadSpans];
  __shared__ int64_t ends[kMaxReadSpans];
  for (int s = static_cast<int>(threadIdx.x); s < t.count; s += static_cast<int>(blockDim.x)) {
    data[s] = t.data[s];
    ends[s] = t.ends[s];
  }
  __syncthreads();
  const int64_t total = ends[t.count - 1];
  const auto chunk = [&](int64_t j) { return joint_chunk(data, ends, t.count, j); };
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  uint32_t acc = 0;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kInFlight - 1) * stride < total; i += kInFlight * stride) {
    uint4 v[kInFlight];
    FD_UNROLL
    for (int u = 0; u < kInFlight; ++u) v[u] = __ldg(chunk(i + u * stride));
    FD_UNROLL
    for (int u = 0; u < kInFlight; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < total; i += stride) {
    const uint4 v = __ldg(chunk(i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // Each warp's XOR of its words (so no load can be dropped, and a test can check them).
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xFFFFFFFFu, acc, o);
  if ((threadIdx.x & 31u) == 0) sink[blockIdx.x * kReadWarps + threadIdx.x / 32] = acc;
}

// The spans in phases read by one launch, each phase's reads used only once every read of the
// phase before has been (a layer's operations, each waiting for the one before, as a kernel that
// streams them across their ends would run them). The phases' joint runs are cut into items of
// kInFlight rounds of the block's threads, taken in order from a ticket counter
// (counters[0]); an item issues its loads, then waits until counters[p] (phase p - 1's items done)
// is that phase's whole count, then uses them and counts itself in at counters[1 + p]. Taking
// items in ticket order, a block waits only for items already taken by running blocks (no
// deadlock, whatever the grid), and the emulator's blocks, one after another, see every wait met.
template <int kInFlight>
__global__ void read_phases_kernel(ReadPhaseTable t, uint32_t* sink, unsigned* counters) {
  FD_GRID_PROLOGUE();
  __shared__ const uint4* data[kMaxReadSpans];
  __shared__ int64_t ends[kMaxReadSpans];
  __shared__ int64_t next_item;
  for (int s = static_cast<int>(threadIdx.x); s < t.spans.count;
       s += static_cast<int>(blockDim.x)) {
    data[s] = t.spans.data[s];
    ends[s] = t.spans.ends[s];
  }
  const auto chunk = [&](int64_t j) { return joint_chunk(data, ends, t.spans.count, j); };
  constexpr int64_t kItemChunks = int64_t{kInFlight} * kReadThreads;
  const int64_t items = t.end_item[t.phases - 1];
  if (threadIdx.x == 0) next_item = atomicAdd(counters, 1u);
  __syncthreads();
  int64_t item = next_item;
  __syncthreads();  // every thread has its first item before thread 0 takes the next
  uint32_t acc = 0;
  while (item < items) {
    int p = 0;
    while (item >= t.end_item[p]) ++p;
    const int64_t first_item = p == 0 ? 0 : t.end_item[p - 1];
    const int64_t first = (p == 0 ? 0 : t.end_chunk[p - 1]) + (item - first_item) * kItemChunks;
    const int64_t limit = t.end_chunk[p];
    uint4 v[kInFlight];
    FD_UNROLL
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t j = first + u * kReadThreads + threadIdx.x;
      v[u] = j < limit ? __ldg(chunk(j)) : uint4{0u, 0u, 0u, 0u};
    }
    if (threadIdx.x == 0) {
      // The next item taken while this one's loads are in flight.
      next_item = atomicAdd(counters, 1u);
      if (p > 0) {
        const unsigned before =
            static_cast<unsigned>(first_item - (p == 1 ? 0 : t.end_item[p - 2]));
        while (*reinterpret_cast<volatile unsigned*>(counters + p) < before) {
#ifndef FLASHDESK_CUDA_EMU
          __nanosleep(64);
#endif
        }
        __threadfence();
      }
    }
    __syncthreads();  // phase p - 1 done; next_item set
    FD_UNROLL
    for (int u = 0; u < kInFlight; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    const int64_t next = next_item;
    __syncthreads();  // every thread has its loads and next_item
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(counters + 1 + p, 1u);
    }
    item = next;
  }
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xFFFFFFFFu, acc, o);
  if ((threadIdx.x & 31u) == 0) sink[blockIdx.x * kReadWarps + threadIdx.x / 32] = acc;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void fill(CudaBackend& be, Tensor& t, const FillSpec& spec) {
  const int64_t bytes = static_cast<int64_t>(t.nbytes());
  const int64_t elem = spec.kind == Fill::Bf16                                  ? 2
                       : spec.kind == Fill::F32 || spec.kind == Fill::Bf16InF32 ? 4
                                                                                : 1;
  if (bytes == 0) return;
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  const unsigned blocks = std::min(blocks_for(bytes / elem, 256), 4u * 132u * 8u);
  FD_LAUNCH(fill_kernel, dim3(blocks), dim3(256), 0, ctx.stream(), ptr<uint8_t>(t), bytes, elem,
            spec);
}

Tensor read_spans_sink(CudaBackend& be) {
  return be.alloc(DType::I32, Shape{kMaxReadBlocksPerSm * kReadWarps *
                                    static_cast<int64_t>(be.context().multiprocessors())});
}

namespace {

// Adds `spans` to the table's joint run of chunks.
void add_spans(ReadSpanTable& t, const std::vector<ReadSpan>& spans) {
  FD_CHECK(t.count + spans.size() <= kMaxReadSpans, "read_spans: at most 64 spans");
  for (const ReadSpan& s : spans) {
    FD_CHECK(reinterpret_cast<uintptr_t>(s.data) % 16 == 0, "read_spans: a span not 16-aligned");
    t.data[t.count] = static_cast<const uint4*>(s.data);
    t.ends[t.count] = (t.count == 0 ? 0 : t.ends[t.count - 1]) + static_cast<int64_t>(s.bytes / 16);
    ++t.count;
  }
}

// f.template operator()<N>() for N = in_flight (4, 8 or 16: read_blocks checked it).
template <class F>
void with_in_flight(int in_flight, F&& f) {
  if (in_flight == 4)
    f.template operator()<4>();
  else if (in_flight == 8)
    f.template operator()<8>();
  else
    f.template operator()<16>();
}

int64_t read_blocks(CudaBackend& be, const Tensor& sink, int in_flight, int blocks_per_sm) {
  FD_CHECK(in_flight == 4 || in_flight == 8 || in_flight == 16,
           "read_spans: 4, 8 or 16 loads in flight");
  FD_CHECK(blocks_per_sm >= 1 && blocks_per_sm <= kMaxReadBlocksPerSm,
           "read_spans: 1 to 8 blocks a multiprocessor");
  const int64_t blocks = blocks_per_sm * static_cast<int64_t>(be.context().multiprocessors());
  FD_CHECK(sink.dtype() == DType::I32 && sink.numel() >= blocks * kReadWarps,
           "read_spans: the sink is read_spans_sink's");
  return blocks;
}

}  // namespace

void read_spans(CudaBackend& be, const std::vector<ReadSpan>& spans, Tensor& sink, int in_flight,
                int blocks_per_sm) {
  FD_CHECK(!spans.empty(), "read_spans: 1 to 64 spans");
  ReadSpanTable t{};
  add_spans(t, spans);
  const int64_t blocks = read_blocks(be, sink, in_flight, blocks_per_sm);
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  const dim3 grid(static_cast<unsigned>(blocks)), block(kReadThreads);
  uint32_t* out = reinterpret_cast<uint32_t*>(ptr<int32_t>(sink));
  with_in_flight(in_flight, [&]<int N>() {
    FD_LAUNCH(read_spans_kernel<N>, grid, block, 0, ctx.stream(), t, out);
  });
}

Tensor read_phases_counters(CudaBackend& be) {
  return be.alloc(DType::I32, Shape{1 + kMaxReadPhases});
}

void read_phases(CudaBackend& be, const std::vector<std::vector<ReadSpan>>& phases, Tensor& sink,
                 Tensor& counters, int in_flight, int blocks_per_sm) {
  FD_CHECK(!phases.empty() && phases.size() <= kMaxReadPhases, "read_phases: 1 to 16 phases");
  FD_CHECK(counters.dtype() == DType::I32 && counters.numel() == 1 + kMaxReadPhases,
           "read_phases: the counters are read_phases_counters'");
  ReadPhaseTable t{};
  const int64_t item_chunks = int64_t{in_flight} * kReadThreads;
  for (const std::vector<ReadSpan>& phase : phases) {
    FD_CHECK(!phase.empty(), "read_phases: a phase without spans");
    add_spans(t.spans, phase);
    const int p = t.phases++;
    t.end_chunk[p] = t.spans.ends[t.spans.count - 1];
    const int64_t chunks = t.end_chunk[p] - (p == 0 ? 0 : t.end_chunk[p - 1]);
    t.end_item[p] = (p == 0 ? 0 : t.end_item[p - 1]) + (chunks + item_chunks - 1) / item_chunks;
  }
  const int64_t blocks = read_blocks(be, sink, in_flight, blocks_per_sm);
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  unsigned* count = reinterpret_cast<unsigned*>(ptr<int32_t>(counters));
  FD_CUDA_CHECK(cudaMemsetAsync(count, 0, counters.nbytes(), ctx.stream()));
  const dim3 grid(static_cast<unsigned>(blocks)), block(kReadThreads);
  uint32_t* out = reinterpret_cast<uint32_t*>(ptr<int32_t>(sink));
  with_in_flight(in_flight, [&]<int N>() {
    FD_LAUNCH(read_phases_kernel<N>, grid, block, 0, ctx.stream(), t, out, count);
  });
}

double device_ms(CudaBackend& be, const std::function<void()>& issue) {
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  cuda::Event start, end;
  start.record(ctx.stream());
  issue();
  end.record(ctx.stream());
  end.synchronize();
  return end.elapsed_ms_since(start);
}

QueuedTime queued_device_ms(CudaBackend& be, const std::function<void()>& issue, double hold_ms) {
  cuda::DeviceContext& ctx = be.context();
  cuda::DeviceGuard g(ctx.device());
  cuda::Event start, end;
  FD_LAUNCH(hold_stream_kernel, dim3(1), dim3(1), 0, ctx.stream(),
            static_cast<int64_t>(hold_ms * 1e6));
  start.record(ctx.stream());
  const auto t0 = std::chrono::steady_clock::now();
  issue();
  QueuedTime t;
  t.host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  end.record(ctx.stream());
  end.synchronize();
  t.device_ms = end.elapsed_ms_since(start);
  return t;
}

double copy_bandwidth(CudaBackend& be, size_t bytes, int runs) {
  Tensor a = be.alloc(DType::U8, Shape{static_cast<int64_t>(bytes)});
  Tensor b = be.alloc(DType::U8, Shape{static_cast<int64_t>(bytes)});
  fill(be, a, FillSpec{Fill::RandomBytes, 7});
  be.copy(a, b);  // warm-up
  std::vector<double> rates;
  for (int r = 0; r < runs; ++r) {
    const double ms = device_ms(be, [&] { be.copy(a, b); });
    rates.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3));
  }
  return median(rates);
}

double bf16_gemm_flops(CudaBackend& be, int64_t n, int runs) {
  Tensor x = be.alloc(DType::BF16, Shape{n, n}), w = be.alloc(DType::BF16, Shape{n, n});
  Tensor y = be.alloc(DType::F32, Shape{n, n});
  fill(be, x, FillSpec{Fill::Bf16, 3, -1.0f, 1.0f});
  fill(be, w, FillSpec{Fill::Bf16, 4, -1.0f, 1.0f});
  cuda::GemmArgs a;
  a.rows = a.cols = a.k = n;
  a.x = x.bytes();
  a.w = w.bytes();
  a.y = ptr<float>(y);
  a.ldx = a.ldw = a.ldy = n;
  cuda::DeviceContext& ctx = be.context();
  ctx.blas().gemm_nt(a);  // warm-up: handle, heuristics
  std::vector<double> rates;
  for (int r = 0; r < runs; ++r) {
    const double ms = device_ms(be, [&] { ctx.blas().gemm_nt(a); });
    rates.push_back(2.0 * static_cast<double>(n) * n * n / (ms * 1e-3));
  }
  return median(rates);
}

uint64_t kernels_launched() {
  return cuda::kernels_launched();
}

void host_launch_trace_begin() {
  cuda::host_launch_trace_begin();
}

std::vector<HostLaunch> host_launch_trace_end() {
  std::vector<HostLaunch> out;
  for (const cuda::HostLaunch& l : cuda::host_launch_trace_end()) out.push_back({l.name, l.ns});
  return out;
}

}  // namespace flashdesk::cuda_bench
