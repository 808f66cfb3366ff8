// CUPTI's kernel activity records (cuda_timeline.h). Built with FD_HAVE_CUPTI where CMake found
// the CUPTI library of the CUDA toolkit; elsewhere the trace says it is not available.
#include "bench/cuda_timeline.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#ifdef FD_HAVE_CUPTI
#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>

#include <mutex>
#endif

namespace flashdesk::bench {

#ifdef FD_HAVE_CUPTI
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
std::mutex g_mutex;
std::vector<KernelSpan> g_spans;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  throw std::runtime_error(std::string("CUPTI ") + what + ": " + (text ? text : "error"));
}

// "flashdesk::cuda::(anonymous namespace)::rms_norm_kernel(float const*, ...)" -> the name
// before the parameter list, without namespaces.
std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && d ? d : mangled;
  std::free(d);
  int depth = 0;
  size_t cut = name.size(), last_scope = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth == 0 && c == '(' && i > 0 && name.compare(i, 21, "(anonymous namespace)") != 0) {
      cut = i;
      break;
    }
    if (depth == 0 && c == ':' && i + 1 < name.size() && name[i + 1] == ':') last_scope = i + 2;
  }
  return name.substr(last_scope, cut - last_scope);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    g_spans.push_back({short_name(k->name), k->start, k->end, k->streamId});
  }
  std::free(buffer);
}

}  // namespace

bool kernel_trace_available(std::string*) {
  return true;
}

void kernel_trace_begin() {
  static const bool registered = [] {
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "callbacks");
    return true;
  }();
  (void)registered;
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("CUDA: synchronize");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_spans.clear();
  }
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable");
}

std::vector<KernelSpan> kernel_trace_end() {
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("CUDA: synchronize");
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
  check(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "disable");
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<KernelSpan> spans = std::move(g_spans);
  g_spans.clear();
  std::sort(spans.begin(), spans.end(),
            [](const KernelSpan& a, const KernelSpan& b) { return a.start < b.start; });
  return spans;
}

#else

bool kernel_trace_available(std::string* why) {
  if (why) *why = "this build has no CUPTI (the CUDA toolkit's CUPTI library was not found)";
  return false;
}
void kernel_trace_begin() {}
std::vector<KernelSpan> kernel_trace_end() {
  return {};
}

#endif

void print_kernel_trace(const std::vector<KernelSpan>& spans) {
  if (spans.empty()) {
    std::printf("(no kernels recorded)\n");
    return;
  }
  const uint64_t t0 = spans.front().start;
  uint64_t latest = t0;
  std::printf("| # | kernel | stream | start µs | end µs | µs | advance µs |\n");
  std::printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < spans.size(); ++i) {
    const KernelSpan& s = spans[i];
    const uint64_t advance = s.end > latest ? s.end - latest : 0;
    latest = std::max(latest, s.end);
    std::printf("| %zu | %s | %u | %.1f | %.1f | %.1f | %.1f |\n", i, s.name.c_str(), s.stream,
                static_cast<double>(s.start - t0) / 1e3, static_cast<double>(s.end - t0) / 1e3,
                static_cast<double>(s.end - s.start) / 1e3, static_cast<double>(advance) / 1e3);
  }
  std::printf("\nspan %.1f µs from the first kernel's start\n",
              static_cast<double>(latest - t0) / 1e3);
}

void print_idle_gaps(const std::vector<KernelSpan>& spans, size_t count) {
  if (spans.empty()) {
    std::printf("(no kernels recorded)\n");
    return;
  }
  struct Gap {
    uint64_t from, to;
    size_t before;  // the span whose end opened the gap; the next span closes it
  };
  std::vector<Gap> gaps;
  uint64_t latest = spans.front().end, busy = spans.front().end - spans.front().start;
  size_t latest_span = 0;
  for (size_t i = 1; i < spans.size(); ++i) {
    const KernelSpan& s = spans[i];
    if (s.start > latest) {
      gaps.push_back({latest, s.start, latest_span});
      busy += s.end - s.start;
    } else if (s.end > latest) {
      busy += s.end - latest;
    }
    if (s.end > latest) {
      latest = s.end;
      latest_span = i;
    }
  }
  const uint64_t span = latest - spans.front().start;
  uint64_t idle = 0;
  for (const Gap& g : gaps) idle += g.to - g.from;
  std::printf("span %.1f µs, kernels busy %.1f µs, idle %.1f µs in %zu gaps\n\n",
              static_cast<double>(span) / 1e3, static_cast<double>(busy) / 1e3,
              static_cast<double>(idle) / 1e3, gaps.size());
  std::sort(gaps.begin(), gaps.end(),
            [](const Gap& a, const Gap& b) { return a.to - a.from > b.to - b.from; });
  std::printf("| gap µs | at µs | after | before |\n| ---: | ---: | --- | --- |\n");
  for (size_t i = 0; i < std::min(count, gaps.size()); ++i) {
    const Gap& g = gaps[i];
    // The kernel that closed the gap: the first to start at its end.
    size_t next = g.before + 1;
    while (next < spans.size() && spans[next].start != g.to) ++next;
    std::printf("| %.1f | %.1f | %s | %s |\n", static_cast<double>(g.to - g.from) / 1e3,
                static_cast<double>(g.from - spans.front().start) / 1e3,
                spans[g.before].name.c_str(), next < spans.size() ? spans[next].name.c_str() : "?");
  }
}

}  // namespace flashdesk::bench
