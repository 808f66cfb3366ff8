// Kernel spans of a stretch of GPU work from CUPTI's activity records, taken inside a benchmark:
// each kernel's start and end on the device's clock, with launches overlapping as they ran
// (Nsight Compute serialises kernels, and Nsight Systems is not on the GPU machine).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashdesk::bench {

struct KernelSpan {
  std::string name;             // demangled, without its parameters
  uint64_t start = 0, end = 0;  // ns on the device's clock
  uint32_t stream = 0;
};

// Whether this build can trace: CUPTI found when it was configured. Otherwise *why says so.
bool kernel_trace_available(std::string* why);
// Starts recording the kernels launched from now on.
void kernel_trace_begin();
// Waits for the device, stops recording and returns the kernels since kernel_trace_begin, by
// start time.
std::vector<KernelSpan> kernel_trace_end();
// The spans as a table: start and end from the first start, duration, and how far each moved the
// latest end so far ("advance": what the kernel added to the stretch; with launches overlapping, a
// kernel starts and waits while its predecessor runs, so its duration overstates its cost).
void print_kernel_trace(const std::vector<KernelSpan>& spans);
// Where the device had no kernel running: the span, the busy time (the union of the kernels'
// spans), and the `count` longest idle gaps with the kernels on either side (a prefill's host
// waits and copies show there; its kernels are too many to list).
void print_idle_gaps(const std::vector<KernelSpan>& spans, size_t count);

}  // namespace flashdesk::bench
