// The caching device pool and the weight arena of the CUDA backend.
#include "engine/ops/cuda/device_memory.h"

#include <algorithm>
#include <string>

#include "engine/ops/cuda/cuda_handles.h"
#include "engine/ops/cuda/cuda_runtime_compat.h"
#include "engine/ops/cuda/step_ops.h"

namespace flashdesk::cuda {

void trace_host_event(const char* name);  // device_context.h
namespace {

constexpr size_t kAlign = 256;

class PoolMemory final : public Memory {
 public:
  PoolMemory(std::shared_ptr<DevicePool> pool, void* ptr, size_t bytes, size_t block)
      : pool_(std::move(pool)), ptr_(static_cast<uint8_t*>(ptr)), bytes_(bytes), block_(block) {}
  ~PoolMemory() override { pool_->release(ptr_, block_); }
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;
  uint8_t* address() override { return ptr_; }
  size_t bytes() const override { return bytes_; }
  bool host_accessible() const override { return false; }

 private:
  std::shared_ptr<DevicePool> pool_;
  uint8_t* ptr_;
  size_t bytes_, block_;
};

// A weight tensor's bytes inside an arena chunk (which it keeps alive).
class ArenaMemory final : public Memory {
 public:
  ArenaMemory(std::shared_ptr<Memory> chunk, size_t offset, size_t bytes)
      : chunk_(std::move(chunk)), offset_(offset), bytes_(bytes) {}
  uint8_t* address() override { return chunk_->address() + offset_; }
  size_t bytes() const override { return bytes_; }
  bool host_accessible() const override { return false; }

 private:
  std::shared_ptr<Memory> chunk_;
  size_t offset_, bytes_;
};

// Frees on `device` from a destructor: no throwing guard there (a failing runtime at teardown
// must not terminate the process), so the device is switched and restored by hand.
void free_on(int device, const std::vector<void*>& blocks) {
  int previous = 0;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device &&
                        cudaSetDevice(device) == cudaSuccess;
  for (void* p : blocks) {
    trace_host_event("cudaFree");
    cudaFree(p);
  }
  if (switched) cudaSetDevice(previous);
}

}  // namespace

DevicePool::DevicePool(int device, size_t cached_limit)
    : device_(device), cached_limit_(cached_limit) {}

DevicePool::~DevicePool() {
  for (auto& [size, blocks] : free_) free_on(device_, blocks);
}

// Sizes round up to a quarter of their power of two (at most 25% slack), so blocks of nearby sizes
// are shared between steps whose shapes differ slightly.
size_t DevicePool::block_size(size_t bytes) {
  if (bytes <= 4096) return (bytes + kAlign - 1) / kAlign * kAlign;
  size_t p = 1;
  while (p * 2 <= bytes) p *= 2;
  const size_t quarter = p / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

void* DevicePool::device_malloc(size_t bytes) {
  void* p = nullptr;
  trace_host_event("cudaMalloc");
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error before retrying
    trim();
    e = cudaMalloc(&p, bytes);
  }
  if (e != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cuda_call_failed(static_cast<int>(e), cudaGetErrorName(e), cudaGetErrorString(e),
                     ("cudaMalloc of " + std::to_string(bytes) + " bytes (device " +
                      std::to_string(device_) + ": " + std::to_string(free_b >> 20) + " of " +
                      std::to_string(total_b >> 20) + " MiB free)")
                         .c_str(),
                     __FILE__, __LINE__);
  }
  return p;
}

std::shared_ptr<Memory> DevicePool::allocate(size_t bytes, bool exact) {
  const size_t block =
      exact ? (bytes + kAlign) / kAlign * kAlign : block_size(bytes == 0 ? 1 : bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(block);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cached_ -= block;
    }
    live_ += block;
  }
  if (!p) {
    DeviceGuard guard(device_);
    p = device_malloc(block);
  }
  return std::make_shared<PoolMemory>(shared_from_this(), p, bytes, block);
}

void DevicePool::release(void* ptr, size_t block) {
  std::unique_lock<std::mutex> lock(mu_);
  live_ -= block;
  if (cached_ + block <= cached_limit_ || hold_frees_) {
    free_[block].push_back(ptr);
    cached_ += block;
    return;
  }
  lock.unlock();
  free_on(device_, {ptr});  // called from a destructor: nothing may throw
}

void DevicePool::hold_frees(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  hold_frees_ = on;
}

void DevicePool::order_cached_blocks() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, blocks] : free_)
    std::sort(blocks.begin(), blocks.end(), [](void* a, void* b) {
      return reinterpret_cast<uintptr_t>(a) > reinterpret_cast<uintptr_t>(b);
    });
}

void DevicePool::trim() {
  std::map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(free_);
    cached_ = 0;
  }
  DeviceGuard guard(device_);
  for (auto& [size, list] : blocks)
    for (void* p : list) FD_CUDA_CHECK(cudaFree(p));
}

size_t DevicePool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

size_t DevicePool::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

std::shared_ptr<Memory> WeightArena::allocate(size_t bytes) {
  const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
  if (need > kChunkBytes / 4)
    return pool_->allocate(bytes, true);  // large tensors get their own block
  if (!chunk_ || chunk_used_ + need > kChunkBytes) {
    chunk_ = pool_->allocate(kChunkBytes, true);
    chunk_used_ = 0;
  }
  auto m = std::make_shared<ArenaMemory>(chunk_, chunk_used_, bytes);
  chunk_used_ += need;
  used_ += need;
  return m;
}

unsigned* grow_arrival_counters(Tensor& held, int64_t count, DevicePool& pool,
                                cudaStream_t stream) {
  if (!held.defined() || held.numel() < count) {
    const int64_t n = std::max<int64_t>(4096, (count + 4095) / 4096 * 4096);
    held = Tensor(pool.allocate(static_cast<size_t>(n) * 4), 0, DType::I32, Shape{n});
    fill_async(held.bytes(), 0, held.nbytes(), stream);
  }
  return static_cast<unsigned*>(static_cast<void*>(held.bytes()));
}

}  // namespace flashdesk::cuda
