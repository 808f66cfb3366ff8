// Fixed worker threads with a blocking parallel_for.
#include "engine/ops/cpu/thread_pool.h"

#include <algorithm>

namespace flashdesk {

namespace {

// Part p of n split into `parts` near-equal contiguous ranges.
std::pair<int64_t, int64_t> part_range(int64_t n, int parts, int p) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = p * base + std::min<int64_t>(p, extra);
  return {begin, begin + base + (p < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int parts = static_cast<int>(std::min<int64_t>(size(), by_size));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  wake_.notify_all();
  const auto [b, e] = part_range(n, parts, 0);
  fn(b, e);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_parts_) continue;
    const auto* fn = job_;
    const auto [b, e] = part_range(job_n_, job_parts_, index);
    lock.unlock();
    (*fn)(b, e);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace flashdesk
