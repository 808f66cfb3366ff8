// A cache of freed host buffers for the optimised CPU backend's tensors. The model allocates its
// activations afresh in every step; without a cache each large allocation is a new mmap whose
// pages fault in on first touch (several percent of a decode step on the demo model).
//
// Buffers are kept by size class (four classes per power of two, so at most 25% slack), up to a
// byte budget; tensors hold the pool by shared_ptr, so it outlives the backend if they do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "engine/ops/tensor.h"

namespace flashdesk {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // max_cached: bytes of free buffers kept for reuse; beyond that, freed buffers are released.
  static std::shared_ptr<BufferPool> create(size_t max_cached);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A 64-byte-aligned host allocation of at least `bytes`, returned to the pool when the last
  // tensor holding it goes away.
  std::shared_ptr<Memory> allocate(size_t bytes);

  size_t cached_bytes() const;
  // Size class (capacity) of a request: the smallest of 4 steps per power of two >= bytes.
  static size_t capacity_for(size_t bytes);

 private:
  explicit BufferPool(size_t max_cached) : max_cached_(max_cached) {}
  friend class PooledMemory;
  void give_back(uint8_t* data, size_t capacity);

  mutable std::mutex mutex_;
  std::multimap<size_t, uint8_t*> free_;  // capacity -> buffer
  size_t cached_ = 0;
  size_t max_cached_;
};

}  // namespace flashdesk
