// Device memory of the CUDA backend: a caching pool for activations and scratch (cudaMalloc and
// cudaFree are slow and cudaFree synchronises the device) and a bump arena for weights, which live
// as long as the model. Both hand out Memory objects (tensor.h) that are not host-accessible.
//
// Reuse is safe without events because every op of a backend runs on its one stream: a buffer
// freed on the host and handed out again is only touched by later work of the same stream. The
// beside lane (beside_lane.h) is the one exception and keeps to it: its work waits for everything
// issued to the stream before it, uses scratch of its own, and is joined before the tensors it
// reads or writes are released. Non-goals: several streams sharing a pool, defragmentation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/ops/cuda/cuda_runtime_compat.h"
#include "engine/ops/tensor.h"

namespace flashdesk::cuda {

class DevicePool : public std::enable_shared_from_this<DevicePool> {
 public:
  // cached_limit: freed bytes kept for reuse; beyond it freed blocks go back to the driver.
  DevicePool(int device, size_t cached_limit);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // A block of at least `bytes` (256-byte aligned), contents undefined. `exact`: no rounding up to
  // a size class (weights, which are never freed and reused).
  std::shared_ptr<Memory> allocate(size_t bytes, bool exact = false);
  void release(void* ptr, size_t block_bytes);  // called by the Memory objects it handed out
  void trim();                                  // gives every cached block back to the driver
  // While a step graph is captured, freed blocks stay cached past the limit: cudaFree would wait
  // for the device, which a capture forbids (the cache may then stay above its limit until blocks
  // are reused).
  void hold_frees(bool on);
  // Puts every size's cached blocks in address order, the lowest handed out first: at a step's
  // start, so that a step that allocates and frees as an earlier one did, with the same blocks
  // live, gets the same addresses (a recorded step graph replays only then; step_graph.h).
  // Within the step the most recently freed block is reused first, as always.
  void order_cached_blocks();
  size_t cached_bytes() const;
  size_t live_bytes() const;

 private:
  void* device_malloc(size_t bytes);
  static size_t block_size(size_t bytes);

  int device_;
  size_t cached_limit_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // block size -> cached blocks
  size_t cached_ = 0, live_ = 0;
  bool hold_frees_ = false;
};

// Weights: sub-allocated from large chunks that are freed when their last tensor dies.
class WeightArena {
 public:
  explicit WeightArena(std::shared_ptr<DevicePool> pool) : pool_(std::move(pool)) {}
  std::shared_ptr<Memory> allocate(size_t bytes);
  size_t bytes_used() const { return used_; }

  static constexpr size_t kChunkBytes = size_t{256} << 20;

 private:
  std::shared_ptr<DevicePool> pool_;
  std::shared_ptr<Memory> chunk_;
  size_t chunk_used_ = 0, used_ = 0;
};

// Arrival counters (DeviceContext::arrival_counters, the beside lane's own): `held` grown to at
// least `count` counters in whole pages of 4096, the new buffer zeroed on `stream`. The old buffer
// goes back to the pool, whose later users the main stream orders: a caller on another stream
// waits for its own earlier work first.
unsigned* grow_arrival_counters(Tensor& held, int64_t count, DevicePool& pool, cudaStream_t stream);

}  // namespace flashdesk::cuda
