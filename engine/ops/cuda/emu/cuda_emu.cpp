// The CPU emulation of the CUDA runtime and thread model (cuda_emu.h): device memory is host
// memory, streams and events are immediate, and each block's threads are ucontext fibers that
// switch only at barriers and warp shuffles.
#include "engine/ops/cuda/emu/cuda_emu.h"

#include <ucontext.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace fd_emu {
namespace {

constexpr size_t kStackBytes = 256 * 1024;

struct Fiber {
  ucontext_t context;
  ThreadContext thread;
  bool done = false;
};

struct Scope {  // a barrier over the live threads of a block or of one warp
  int live = 0;
  int arrived = 0;
  uint64_t generation = 0;
};

struct BlockRun {
  std::vector<Fiber> fibers;
  std::vector<Scope> warps;
  std::array<Scope, 16> named;     // bar.sync / bar.arrive ids (0 is the block's own barrier)
  std::vector<uint64_t> exchange;  // one slot per thread
  std::vector<std::array<uint32_t, 6>> fragments;  // one A and B fragment per thread (mma)
  Scope block;
  ucontext_t scheduler;
  Fiber* running = nullptr;
  uint64_t progress =
      0;  // barrier releases and finished threads: a round without any is a deadlock
  const std::function<void()>* body = nullptr;
  unsigned char* smem = nullptr;
};

BlockRun* g_block = nullptr;

void yield_to_scheduler() {
  BlockRun& b = *g_block;
  Fiber* me = b.running;
  swapcontext(&me->context, &b.scheduler);
}

void wait_at(Scope& s) {
  const uint64_t gen = s.generation;
  if (++s.arrived == s.live) {
    s.arrived = 0;
    ++s.generation;
    ++g_block->progress;
    return;
  }
  while (s.generation == gen) yield_to_scheduler();
}

void leave(Scope& s) {
  --s.live;
  if (s.arrived > 0 && s.arrived == s.live) {
    s.arrived = 0;
    ++s.generation;
  }
}

void fiber_main() {
  BlockRun& b = *g_block;
  (*b.body)();
  Fiber* me = b.running;
  me->done = true;
  ++b.progress;
  leave(b.block);
  leave(b.warps[me->thread.warp]);
  // Returning switches to uc_link, the scheduler.
}

struct Stacks {
  std::vector<std::unique_ptr<char[]>> stacks;
  void ensure(size_t n) {
    while (stacks.size() < n) stacks.emplace_back(new char[kStackBytes]);
  }
};

cudaError_t g_last_error = cudaSuccess;

}  // namespace

ThreadContext& ctx() {
  if (!g_block || !g_block->running) {
    std::fprintf(stderr, "cuda emulator: device builtin used outside a kernel\n");
    std::abort();
  }
  return g_block->running->thread;
}

void async_copy(void* dst, const void* src, int bytes) {
  const auto mask = static_cast<uintptr_t>(bytes - 1);
  if ((bytes != 4 && bytes != 8 && bytes != 16) || (reinterpret_cast<uintptr_t>(dst) & mask) != 0)
    misaligned_access(dst, bytes);
  if ((reinterpret_cast<uintptr_t>(src) & mask) != 0) misaligned_access(src, bytes);
  PendingCopy c{dst, {}, bytes};
  std::memcpy(c.bytes, src, static_cast<size_t>(bytes));
  ctx().open_copies.push_back(c);
}

void async_commit() {
  ThreadContext& t = ctx();
  t.copy_groups.push_back(std::move(t.open_copies));
  t.open_copies.clear();
}

void async_wait(int pending) {
  ThreadContext& t = ctx();
  const size_t keep = static_cast<size_t>(pending < 0 ? 0 : pending);
  if (t.copy_groups.size() <= keep) return;
  const size_t landed = t.copy_groups.size() - keep;
  for (size_t g = 0; g < landed; ++g)
    for (const PendingCopy& c : t.copy_groups[g])
      std::memcpy(c.dst, c.bytes, static_cast<size_t>(c.size));
  t.copy_groups.erase(t.copy_groups.begin(),
                      t.copy_groups.begin() + static_cast<ptrdiff_t>(landed));
}

void misaligned_access(const void* address, int bytes) {
  const ThreadContext& t = ctx();
  std::fprintf(stderr,
               "cuda emulator: misaligned %d-byte access at %p by thread (%u,%u,%u) of block "
               "(%u,%u,%u)\n",
               bytes, address, t.thread_idx.x, t.thread_idx.y, t.thread_idx.z, t.block_idx.x,
               t.block_idx.y, t.block_idx.z);
  std::abort();
}

void block_barrier() {
  wait_at(g_block->block);
}

void warp_barrier() {
  wait_at(g_block->warps[ctx().warp]);
}

void named_barrier(unsigned id, unsigned count, bool wait) {
  if (id == 0 || id >= g_block->named.size() || count == 0 || count % 32 != 0) {
    std::fprintf(stderr, "cuda emulator: named barrier %u with %u threads\n", id, count);
    std::abort();
  }
  Scope& s = g_block->named[id];
  const uint64_t gen = s.generation;
  if (++s.arrived == static_cast<int>(count)) {
    s.arrived = 0;
    ++s.generation;
    ++g_block->progress;
    return;
  }
  if (!wait) return;
  while (s.generation == gen) yield_to_scheduler();
}

uint64_t warp_exchange(uint64_t value, unsigned src) {
  BlockRun& b = *g_block;
  const ThreadContext& t = ctx();
  const unsigned flat = t.warp * 32 + t.lane;
  b.exchange[flat] = value;
  warp_barrier();
  const uint64_t got = b.exchange[t.warp * 32 + (src & 31u)];
  warp_barrier();
  return got;
}

namespace {
float bf16_value(uint32_t bits16) {
  const uint32_t w = bits16 << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

// An FP16 value (1 sign, 5 exponent bits of bias 15, 10 mantissa bits).
float f16_value(uint32_t bits) {
  const uint32_t e = (bits >> 10) & 31u, m = bits & 1023u;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
            : e == 31
                ? (m ? std::nanf("") : INFINITY)
                : std::ldexp(1.0f + static_cast<float>(m) / 1024.0f, static_cast<int>(e) - 15);
  return (bits & 0x8000u) ? -v : v;
}

// d += A * B for the m16n8k16 fragments with 16-bit inputs read by value_of (BF16 or FP16).
void mma_16816(float* d, const uint32_t* a, const uint32_t* b, float (*value_of)(uint32_t)) {
  BlockRun& run = *g_block;
  const ThreadContext& t = ctx();
  const unsigned base = t.warp * 32;
  auto& mine = run.fragments[base + t.lane];
  for (int i = 0; i < 4; ++i) mine[static_cast<size_t>(i)] = a[i];
  mine[4] = b[0];
  mine[5] = b[1];
  warp_barrier();
  // A (16 x 16, row major) and B (16 x 8, column major) as the PTX ISA lays them over the lanes:
  // lane L holds A rows L/4 and L/4 + 8, columns 2(L%4) + {0,1} and + 8; B columns L/4, rows
  // 2(L%4) + {0,1} and + 8; the low half of a register is the lower index.
  auto a_at = [&](unsigned row, unsigned col) {
    const unsigned lane = (row % 8) * 4 + (col % 8) / 2;
    const unsigned reg = (row >= 8 ? 1 : 0) + (col >= 8 ? 2 : 0);
    return value_of((run.fragments[base + lane][reg] >> (16 * (col % 2))) & 0xFFFFu);
  };
  auto b_at = [&](unsigned k, unsigned col) {
    const unsigned lane = col * 4 + (k % 8) / 2;
    const unsigned reg = k >= 8 ? 5 : 4;
    return value_of((run.fragments[base + lane][reg] >> (16 * (k % 2))) & 0xFFFFu);
  };
  const unsigned g = t.lane / 4, c0 = 2 * (t.lane % 4);
  for (int i = 0; i < 4; ++i) {
    const unsigned row = g + (i >= 2 ? 8 : 0), col = c0 + static_cast<unsigned>(i % 2);
    float acc = d[i];
    for (unsigned k = 0; k < 16; ++k) acc += a_at(row, k) * b_at(k, col);
    d[i] = acc;
  }
  warp_barrier();
}
}  // namespace

void mma_bf16_16816(float* d, const uint32_t* a, const uint32_t* b) {
  mma_16816(d, a, b, bf16_value);
}

void mma_f16_16816(float* d, const uint32_t* a, const uint32_t* b) {
  mma_16816(d, a, b, f16_value);
}

namespace {
// FD_EMU_ORDER=reverse runs a block's threads last to first between barriers: a kernel whose lane
// reads what another lane wrote (shared memory, cp.async) without a barrier between gets the
// other order of the two here too, so a missing __syncwarp or __syncthreads shows in one of the
// two orders (the device promises neither).
bool reverse_order() {
  static const bool reverse = [] {
    const char* v = std::getenv("FD_EMU_ORDER");
    return v != nullptr && std::string(v) == "reverse";
  }();
  return reverse;
}
}  // namespace

unsigned char* dynamic_smem() {
  return g_block->smem;
}

// The work issued while a stream is captured, in issue order (the emulated graph's nodes).
std::vector<std::function<void()>> g_captured_work;
bool g_capturing = false;

void issue(std::function<void()> work) {
  if (g_capturing)
    g_captured_work.push_back(std::move(work));
  else
    work();
}

bool launch_shape_valid(dim3 grid, dim3 block) {
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    g_last_error = cudaErrorInvalidValue;
    return false;
  }
  return true;
}

void launch(dim3 grid, dim3 block, size_t dynamic_smem_bytes, const std::function<void()>& body) {
  const unsigned threads = block.x * block.y * block.z;
  if (!launch_shape_valid(grid, block)) return;
  static Stacks stacks;
  stacks.ensure(threads);
  std::vector<unsigned char> smem_storage(dynamic_smem_bytes + 16);
  unsigned char* smem = smem_storage.data();
  smem += (16 - reinterpret_cast<uintptr_t>(smem) % 16) % 16;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        BlockRun run;
        run.body = &body;
        run.smem = smem;
        run.fibers.resize(threads);
        const unsigned n_warps = (threads + 31) / 32;
        run.warps.resize(n_warps);
        run.exchange.assign(n_warps * 32, 0);
        run.fragments.assign(n_warps * 32, {});
        run.block.live = static_cast<int>(threads);
        for (unsigned i = 0; i < threads; ++i) {
          Fiber& f = run.fibers[i];
          f.thread.block_idx = dim3(bx, by, bz);
          f.thread.grid_dim = grid;
          f.thread.block_dim = block;
          f.thread.thread_idx = dim3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
          f.thread.warp = i / 32;
          f.thread.lane = i % 32;
          ++run.warps[i / 32].live;
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = stacks.stacks[i].get();
          f.context.uc_stack.ss_size = kStackBytes;
          f.context.uc_link = &run.scheduler;
          makecontext(&f.context, fiber_main, 0);
        }
        g_block = &run;
        size_t remaining = threads;
        while (remaining > 0) {
          const uint64_t before = run.progress;
          for (unsigned i = 0; i < threads; ++i) {
            Fiber& f = run.fibers[reverse_order() ? threads - 1 - i : i];
            if (f.done) continue;
            run.running = &f;
            swapcontext(&run.scheduler, &f.context);
            run.running = nullptr;
            if (f.done) --remaining;
          }
          if (remaining > 0 && run.progress == before) {
            std::fprintf(stderr,
                         "cuda emulator: deadlock in block (%u,%u,%u): threads wait at barriers "
                         "that not every live thread reaches\n",
                         bx, by, bz);
            std::abort();
          }
        }
        g_block = nullptr;
      }
}

}  // namespace fd_emu

// ---- runtime API
// ---------------------------------------------------------------------------------

namespace {

constexpr size_t kEmuMemory = size_t{16} << 30;
size_t g_allocated = 0;

}  // namespace

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
  }
  return "unknown error";
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
  }
  return "cudaErrorUnknown";
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = fd_emu::g_last_error;
  fd_emu::g_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d != 0) return cudaErrorInvalidDevice;
  *p = {};
  std::snprintf(p->name, sizeof(p->name), "FlashDesk CUDA emulator (CPU)");
  p->totalGlobalMem = kEmuMemory;
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = 99 * 1024;
  p->multiProcessorCount = 4;
  p->major = 8;
  p->minor = 0;
  p->l2CacheSize = 4 << 20;
  p->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = kEmuMemory;
  *free_bytes = kEmuMemory > g_allocated ? kEmuMemory - g_allocated : 0;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  // Poisoned, like fresh device memory is undefined: a kernel reading what nothing wrote shows.
  void* m = ::operator new (bytes ? bytes : 1, std::align_val_t{256}, std::nothrow);
  if (!m) return cudaErrorMemoryAllocation;
  std::memset(m, 0xC3, bytes);
  g_allocated += bytes;
  *p = m;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (p) ::operator delete (p, std::align_val_t{256});
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t) {
  fd_emu::issue([=] {
    if (bytes) std::memmove(dst, src, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  fd_emu::issue([=] {
    if (bytes) std::memset(p, value, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  static int token;
  *s = reinterpret_cast<cudaStream_t>(&token);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  return cudaSuccess;
}

namespace {
struct EmuEvent {
  std::chrono::steady_clock::time_point at;
};
}  // namespace

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = reinterpret_cast<cudaEvent_t>(new EmuEvent{});
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<EmuEvent*>(e);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  reinterpret_cast<EmuEvent*>(e)->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t) {
  return cudaSuccess;
}

// Work runs when it is issued here, so every stream is already in order.
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) {
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = std::chrono::duration<float, std::milli>(reinterpret_cast<EmuEvent*>(end)->at -
                                                 reinterpret_cast<EmuEvent*>(start)->at)
            .count();
  return cudaSuccess;
}

namespace {
struct EmuGraph {
  std::vector<std::function<void()>> work;
};
}  // namespace

cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  if (fd_emu::g_capturing) return cudaErrorInvalidValue;
  fd_emu::g_capturing = true;
  fd_emu::g_captured_work.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  if (!fd_emu::g_capturing) return cudaErrorInvalidValue;
  fd_emu::g_capturing = false;
  *graph = reinterpret_cast<cudaGraph_t>(new EmuGraph{std::move(fd_emu::g_captured_work)});
  fd_emu::g_captured_work.clear();
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t*, size_t* count) {
  *count = reinterpret_cast<EmuGraph*>(graph)->work.size();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = reinterpret_cast<cudaGraphExec_t>(new EmuGraph{*reinterpret_cast<EmuGraph*>(graph)});
  return cudaSuccess;
}

// Same node count: the emulation's stand-in for the same topology.
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo*) {
  auto* e = reinterpret_cast<EmuGraph*>(exec);
  const auto* g = reinterpret_cast<EmuGraph*>(graph);
  if (e->work.size() != g->work.size()) return cudaErrorInvalidValue;
  e->work = g->work;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  for (const std::function<void()>& w : reinterpret_cast<EmuGraph*>(exec)->work) fd_emu::issue(w);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<EmuGraph*>(graph);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<EmuGraph*>(exec);
  return cudaSuccess;
}
