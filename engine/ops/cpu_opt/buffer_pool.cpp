// Size-classed cache of freed host buffers (buffer_pool.h).
#include "engine/ops/cpu_opt/buffer_pool.h"

#include <bit>
#include <new>

namespace flashdesk {

namespace {
constexpr std::align_val_t kAlign{64};
}  // namespace

// A buffer lent by the pool; going back to it on destruction.
class PooledMemory final : public Memory {
 public:
  PooledMemory(std::shared_ptr<BufferPool> pool, uint8_t* data, size_t bytes, size_t capacity)
      : pool_(std::move(pool)), data_(data), bytes_(bytes), capacity_(capacity) {}
  ~PooledMemory() override { pool_->give_back(data_, capacity_); }
  PooledMemory(const PooledMemory&) = delete;
  PooledMemory& operator=(const PooledMemory&) = delete;
  uint8_t* address() override { return data_; }
  size_t bytes() const override { return bytes_; }
  bool host_accessible() const override { return true; }

 private:
  std::shared_ptr<BufferPool> pool_;
  uint8_t* data_;
  size_t bytes_, capacity_;
};

std::shared_ptr<BufferPool> BufferPool::create(size_t max_cached) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached));
}

BufferPool::~BufferPool() {
  for (auto& [capacity, data] : free_) ::operator delete(data, kAlign);
}

size_t BufferPool::capacity_for(size_t bytes) {
  if (bytes <= 256) return 256;
  const size_t top = std::bit_floor(bytes);  // 2^e <= bytes
  const size_t step = top / 4;
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<Memory> BufferPool::allocate(size_t bytes) {
  const size_t capacity = capacity_for(bytes);
  uint8_t* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(capacity);
    if (it != free_.end()) {
      data = it->second;
      free_.erase(it);
      cached_ -= capacity;
    }
  }
  if (!data) data = static_cast<uint8_t*>(::operator new(capacity, kAlign));
  return std::make_shared<PooledMemory>(shared_from_this(), data, bytes, capacity);
}

void BufferPool::give_back(uint8_t* data, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + capacity <= max_cached_) {
      free_.emplace(capacity, data);
      cached_ += capacity;
      return;
    }
  }
  ::operator delete(data, kAlign);
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

}  // namespace flashdesk
