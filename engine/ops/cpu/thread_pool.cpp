// Fixed worker threads with a blocking parallel_for whose parts any thread may claim; idle threads
// spin briefly before sleeping.
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

// The claim word of a job: generation (low 32 bits of it), part count, next unclaimed part.
uint64_t claim_word(uint64_t generation, int parts, int next) {
  return (generation & 0xFFFFFFFFu) << 32 | uint64_t(parts) << 16 | uint64_t(next);
}

}  // namespace

// Between polls the thread yields its core: with more threads than free cores (tests run in
// parallel, a busy desktop) a pure spin would keep the thread that has work from running.
template <class Ready>
bool ThreadPool::spin_until(Ready ready) const {
  if (spin_.count() == 0) return ready();
  const auto until = std::chrono::steady_clock::now() + spin_;
  for (int i = 1;; ++i) {
    if (ready()) return true;
    std::this_thread::yield();
    if (i % 16 == 0 && std::chrono::steady_clock::now() >= until) return ready();
  }
}

ThreadPool::ThreadPool(int threads, std::chrono::microseconds spin) : spin_(spin) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  // At most 0xFFFF parts: the claim word counts them in 16 bits.
  const int parts = static_cast<int>(std::min<int64_t>({size(), by_size, 0xFFFF}));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  done_parts_.store(0, std::memory_order_relaxed);
  const uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
  claim_.store(claim_word(generation, parts, 0), std::memory_order_release);
  {
    // Under the mutex, so that a worker about to sleep either sees the new generation in its
    // wait predicate or is already waiting when notify_all runs.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.store(generation, std::memory_order_release);
  }
  wake_.notify_all();  // no system call when every worker is still spinning
  run_parts(generation);
  // Every part is claimed now; wait for those that other threads are still running.
  const auto all_done = [&] { return done_parts_.load(std::memory_order_acquire) == parts; };
  if (!spin_until(all_done)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, all_done);
  }
  job_ = nullptr;
}

void ThreadPool::run_parts(uint64_t generation) {
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    const int parts = static_cast<int>((word >> 16) & 0xFFFF),
              next = static_cast<int>(word & 0xFFFF);
    if (word >> 32 != (generation & 0xFFFFFFFFu) || next >= parts) return;
    if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    // Part `next` is this thread's: the job cannot change until it is counted done.
    const auto [b, e] = part_range(job_n_, parts, next);
    (*job_)(b, e);
    if (done_parts_.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) {
      // The caller may be blocked in done_.wait: notify under the mutex so it cannot miss it.
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
    word = claim_.load(std::memory_order_acquire);
  }
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  const auto ready = [&] {
    return stop_.load(std::memory_order_acquire) ||
           generation_.load(std::memory_order_acquire) != seen;
  };
  if (!spin_until(ready)) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, ready);
  }
  return generation_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_job(seen);
    if (stop_.load(std::memory_order_acquire)) return;
    run_parts(seen);
  }
}

}  // namespace flashdesk
