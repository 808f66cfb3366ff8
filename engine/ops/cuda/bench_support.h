// Measurement helpers for the CUDA benchmarks (bench/cuda_*), in plain C++: random tensor contents
// generated on the device (so layers at the full V4.1 shapes need no checkpoint written, read or
// copied over PCIe), device-time measurement of work issued on a backend's stream, and the two
// ceilings a run measures itself: device-to-device copy bandwidth and the BF16 GEMM rate.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/ops/cuda/cuda_backend.h"
#include "engine/ops/cuda/no_padding.h"

namespace flashdesk::cuda_bench {

enum class Fill : uint64_t {
  Fp8Codes,     // E4M3 codes, uniform over the non-NaN codes
  E8m0Scales,   // UE8M0 codes 127 + centre +- 2
  RandomBytes,  // packed FP4, or any bytes
  Bf16,         // BF16 values uniform in [lo, hi]
  F32,          // F32 values uniform in [lo, hi]
  Bf16InF32,    // BF16 values uniform in [lo, hi], stored as F32 (the model's F32 streams)
  WindowRows,   // Fp8Window cache rows (codes, then UE8M0 scales near 2^centre)
  EntryRows,    // Fp4Entry rows (packed FP4, then E4M3 scales near 0.1)
  KeyRows,      // Fp4Key rows (packed FP4, then UE8M0 scales near 2^centre)
};

// A kernel parameter: no implicit padding (no_padding.h), so the kind is 8 bytes and the centre
// too.
FD_NO_PADDING_BEGIN
struct FillSpec {
  Fill kind = Fill::RandomBytes;
  uint64_t seed = 1;
  float lo = -1.0f, hi = 1.0f;
  int64_t centre = 0;
  int64_t dim = 0;  // cache rows: the head dim of the format
};
FD_NO_PADDING_END

// Overwrites t with random contents of the given kind, on the device.
void fill(CudaBackend& be, Tensor& t, const FillSpec& spec);

// Device milliseconds of the work `issue` puts on the backend's stream (events around it; waits).
double device_ms(CudaBackend& be, const std::function<void()>& issue);

// The same work issued while the stream is held by a kernel that spins for hold_ms: the device
// then runs it from a full queue, so `device_ms` is its time with no wait on the host (the
// launches' own cost), and `host_ms` what the host took to issue it (with no GPU waiting for
// it). host_ms past hold_ms means the queue ran dry and device_ms includes host time again.
struct QueuedTime {
  double device_ms = 0, host_ms = 0;
};
QueuedTime queued_device_ms(CudaBackend& be, const std::function<void()>& issue, double hold_ms);

// Bytes read plus bytes written per second by a device-to-device copy of `bytes` (median of runs).
double copy_bandwidth(CudaBackend& be, size_t bytes, int runs = 10);

// FLOP/s of an n x n x n BF16 GEMM with FP32 accumulation through cuBLAS (median of runs).
double bf16_gemm_flops(CudaBackend& be, int64_t n, int runs = 10);

// The bytes of `spans` (device memory, 16-aligned) read by one kernel that does nothing else: a
// grid of `blocks_per_sm` (1-8) 256-thread blocks a multiprocessor, each thread issuing
// `in_flight` (4, 8 or 16) 16-byte loads before it uses them (ptxas may interleave them). What a
// kernel streaming those bytes could take in one launch, ramp and tail included: a reference for
// the decode GEMVs and the experts (cuda_gemv_bench "read alone"). A span's bytes past its last
// whole 16 are not read. `sink` (read_spans_sink's) gets each warp's XOR of the 32-bit words it
// read, at [block * 8 + warp]: the XOR of all of them is that of every word read once.
struct ReadSpan {
  const void* data;
  size_t bytes;
};
Tensor read_spans_sink(CudaBackend& be);
void read_spans(CudaBackend& be, const std::vector<ReadSpan>& spans, Tensor& sink, int in_flight,
                int blocks_per_sm);

// The same reads in phases, one launch: each phase's loads are issued whenever the grid reaches
// them, but used only once every read of the phase before has been (a layer's operations, each
// waiting for the one before's output, streamed by one kernel across their ends, with no compute
// of their own). Items of in_flight rounds of a block's threads are taken in order from a ticket;
// `counters` (read_phases_counters') hold the ticket, then each phase's items done: the kernel
// leaves the ticket at the items' count plus the grid's blocks (each takes one past the end).
// 1 to 16 phases, 64 spans in all.
Tensor read_phases_counters(CudaBackend& be);
void read_phases(CudaBackend& be, const std::vector<std::vector<ReadSpan>>& phases, Tensor& sink,
                 Tensor& counters, int in_flight, int blocks_per_sm);

// Kernels launched so far by every CUDA backend of the process (a cuBLAS product counts one).
uint64_t kernels_launched();

// The host's steady clock at each launch of this thread between begin and end
// (device_context.h): the host's time between launches is what it did for the next one.
struct HostLaunch {
  const char* name;
  int64_t ns;
};
void host_launch_trace_begin();
std::vector<HostLaunch> host_launch_trace_end();

}  // namespace flashdesk::cuda_bench

namespace flashdesk::cuda {
template <>
inline constexpr bool kNoPaddingDeclared<cuda_bench::FillSpec> = true;  // its floats
}  // namespace flashdesk::cuda
