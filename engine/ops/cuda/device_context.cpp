// The per-device state of a CUDA backend.
#include "engine/ops/cuda/device_context.h"

#include "engine/ops/cuda/launch_overlap.h"
#include "engine/ops/cuda/step_ops.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace flashdesk::cuda {
namespace {

std::atomic<uint64_t> g_kernels{0};

// Freed activations kept for reuse: half the device memory. Past the limit a free is a cudaFree,
// which waits for the device, and the next allocation of that size a cudaMalloc, run while the
// device sits idle: an 8K-token prefill's layer frees more than 8 GiB (the former cap), and the
// traced prefills (cuda_layer_bench --timeline 1) showed 3-8 ms a layer of such idle gaps.
// Cached blocks do not starve other allocations: a failed cudaMalloc gives them back and retries
// (DevicePool::device_malloc). FLASHDESK_CUDA_POOL_CACHE_GB sets another limit (an A/B, or a
// process sharing the GPU).
size_t cache_limit(const cudaDeviceProp& p) {
  if (const char* gb = std::getenv("FLASHDESK_CUDA_POOL_CACHE_GB")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(gb, &end, 10);
    FD_CHECK(end != gb && *end == '\0' && v < (1ull << 20),
             std::string("FLASHDESK_CUDA_POOL_CACHE_GB must be a whole number of GiB, not '") + gb +
                 "'");
    return static_cast<size_t>(v) << 30;
  }
  return p.totalGlobalMem / 2;
}

cudaDeviceProp properties(int device) {
  cudaDeviceProp p{};
  FD_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p;
}

// Selects the device before the stream is created (members initialise in declaration order).
int select(int device) {
  FD_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

}  // namespace

uint64_t kernels_launched() {
  return g_kernels.load(std::memory_order_relaxed);
}

namespace {
std::atomic<bool> g_tracing{false};
std::thread::id g_trace_thread;   // the thread whose launches the open trace records
std::vector<HostLaunch> g_trace;  // written by that thread only
}  // namespace

void count_kernel_launch(const char* name) {
  g_kernels.fetch_add(1, std::memory_order_relaxed);
  trace_host_event(name);
}

void trace_host_event(const char* name) {
  if (g_tracing.load(std::memory_order_relaxed) && std::this_thread::get_id() == g_trace_thread)
    g_trace.push_back({name, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count()});
}

void host_launch_trace_begin() {
  g_trace.clear();
  g_trace.reserve(4096);
  g_trace_thread = std::this_thread::get_id();
  g_tracing.store(true);
}

std::vector<HostLaunch> host_launch_trace_end() {
  g_tracing.store(false);
  return std::move(g_trace);
}

namespace {

// FLASHDESK_CUDA_PDL, read once: 0 turns the launch overlap off, noprefetch keeps it but makes
// the GEMVs and the decode experts wait before their first loads, acrosswaits overlaps kernels
// that follow an event wait too (wrong in step graphs, note_event_wait: only to measure what
// leaving that out costs); the benchmarks' A/B switches. Anything else: on.
enum class LaunchOverlap { Off, On, NoPrefetch, AcrossWaits };
LaunchOverlap launch_overlap_setting() {
  static const LaunchOverlap setting = [] {
    const char* v = std::getenv("FLASHDESK_CUDA_PDL");
    if (v == nullptr) return LaunchOverlap::On;
    if (std::strcmp(v, "0") == 0) return LaunchOverlap::Off;
    if (std::strcmp(v, "acrosswaits") == 0) return LaunchOverlap::AcrossWaits;
    return std::strcmp(v, "noprefetch") == 0 ? LaunchOverlap::NoPrefetch : LaunchOverlap::On;
  }();
  return setting;
}

}  // namespace

bool gemv_weights_before_wait() {
  const LaunchOverlap s = launch_overlap_setting();
  return s == LaunchOverlap::On || s == LaunchOverlap::AcrossWaits;
}

// The streams whose next kernel follows an event wait, on the thread that issues to them (a
// stream's ops are issued by one thread at a time; a wait and the kernel after it by the same).
// Rarely more than two at once.
thread_local std::vector<cudaStream_t> t_after_event_wait;

void note_event_wait(cudaStream_t stream) {
  if (launch_overlap_setting() == LaunchOverlap::AcrossWaits) return;
  if (std::find(t_after_event_wait.begin(), t_after_event_wait.end(), stream) ==
      t_after_event_wait.end())
    t_after_event_wait.push_back(stream);
}

bool take_event_wait(cudaStream_t stream) {
  const auto it = std::find(t_after_event_wait.begin(), t_after_event_wait.end(), stream);
  if (it == t_after_event_wait.end()) return false;
  t_after_event_wait.erase(it);
  return true;
}

bool programmatic_launch_enabled() {
#ifdef FLASHDESK_CUDA_EMU
  return false;  // the emulation runs kernels one after another anyway
#else
  // Per device, looked up once: compute capability 9.0 or later.
  if (launch_overlap_setting() == LaunchOverlap::Off) return false;
  constexpr int kDevices = 64;
  static std::atomic<int> capable[kDevices] = {};  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return false;
  int state = capable[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
      major = 0;
    state = major >= 9 ? 2 : 1;
    capable[device].store(state, std::memory_order_relaxed);
  }
  return state == 2;
#endif
}

DeviceContext::DeviceContext(int device)
    : device_(select(device)),
      props_(properties(device)),
      stream_(),
      pool_(std::make_shared<DevicePool>(device, cache_limit(props_))),
      weights_(pool_),
      blas_(device, stream_.get()) {}

Tensor DeviceContext::scratch(DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  Tensor t(pool_->allocate(bytes), 0, dtype, shape);
  if (beside_open_) beside_.park(t);
  return t;
}

void DeviceContext::beside_begin() {
  FD_CHECK(!beside_open_, "beside_begin: a section is already open");
  beside_.begin(stream_.get());
  beside_open_ = true;
}

int64_t DeviceContext::beside_end() {
  FD_CHECK(beside_open_, "beside_end: no section is open");
  beside_open_ = false;
  return beside_.end();
}

void DeviceContext::join(int64_t id) {
  FD_CHECK(!beside_open_, "join: a section is open");
  beside_.join(id, stream_.get());
}

void DeviceContext::synchronize() {
  host_wait_begin();
  stream_.synchronize();
  FD_CUDA_CHECK(cudaStreamSynchronize(beside_.stream()));
  host_wait_end();
}

void DeviceContext::step_begin() {
  FD_CHECK(!beside_open_, "step graph: a beside section is open");
  pool_->order_cached_blocks();
  graph_.begin(stream_.get(), beside_.stream());
  beside_.capture_started();
  pool_->hold_frees(true);
}

void DeviceContext::step_end() {
  FD_CHECK(!beside_open_, "step graph: a beside section is open at the step's end");
  if (graph_.recording()) beside_.merge_into(stream_.get());
  graph_.end();
  pool_->hold_frees(false);
}

void DeviceContext::step_abort() {
  beside_open_ = false;
  graph_.abort();
  pool_->hold_frees(false);
}

void DeviceContext::host_wait_begin() {
  if (!graph_.recording()) return;
  FD_CHECK(!beside_open_, "step graph: a host wait inside a beside section");
  beside_.merge_into(stream_.get());  // a capture ends with every stream it forked joined
  graph_.suspend();
}

void DeviceContext::host_wait_end() {
  if (!graph_.in_step() || graph_.recording()) return;
  // Each segment takes the lowest free blocks, as a step does: its addresses then do not depend on
  // which blocks the step's earlier segments took (sized by the routing, or by a compressor's
  // step).
  pool_->order_cached_blocks();
  graph_.resume();
  beside_.capture_started();
}

void DeviceContext::step_cut() {
  if (!graph_.recording()) return;
  host_wait_begin();
  host_wait_end();
}

Tensor DeviceContext::upload_host(DType dtype, Shape shape, const void* data) {
  Tensor t = scratch(dtype, shape);
  if (t.nbytes() == 0) return t;
  const void* src = host_source(data, t.nbytes());
  copy_async(t.bytes(), src, t.nbytes(), cudaMemcpyHostToDevice, stream());
  return t;
}

const void* DeviceContext::host_source(const void* data, size_t bytes) {
  return graph_.recording() ? graph_.stage(data, bytes) : data;
}

}  // namespace flashdesk::cuda

namespace flashdesk::cuda {

Tensor DeviceContext::upload_cached(const void* key, const void* data, size_t bytes) {
  Cached& c = cached_[{key, bytes}];
  const auto* b = static_cast<const uint8_t*>(data);
  if (c.tensor.defined() && c.bytes.size() == bytes &&
      (bytes == 0 || std::memcmp(c.bytes.data(), b, bytes) == 0))
    return c.tensor;
  c.bytes.assign(b, b + bytes);
  c.tensor = upload_host(DType::U8, Shape{static_cast<int64_t>(bytes)}, data);
  return c.tensor;
}

unsigned* DeviceContext::arrival_counters(int64_t count) {
  if (beside_open_) return beside_.counters(count, graph_.recording());
  return grow_arrival_counters(counters_, count, *pool_, stream_.get());
}

}  // namespace flashdesk::cuda
