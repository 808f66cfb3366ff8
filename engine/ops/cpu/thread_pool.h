// A fixed set of worker threads for data-parallel loops of the CPU backends (RAII: the
// destructor joins them). Each index is processed by exactly one thread, in a fixed partition,
// so results do not depend on scheduling.
//
// Decoding one token runs hundreds of small loops back to back; waking a sleeping thread for each
// (a futex wake and a context switch, tens of microseconds) cost a third of decode time. So a
// worker that has just finished spins for a short while (kSpin) before it sleeps, and the caller
// spins while it waits for the others: within a token, no one sleeps.
//
// The parts of a loop are claimed, not assigned: the caller and every worker take the next
// unclaimed part until none is left, and the caller then waits only for parts that others are
// running. On a busy machine a worker that has lost its core therefore delays nothing: the caller
// runs its part (before, every loop waited for every worker to wake and acknowledge it, which
// under load cost a scheduler time slice, milliseconds, per loop).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flashdesk {

class ThreadPool {
 public:
  // How long an idle thread polls for the next loop before it blocks (by default).
  static constexpr std::chrono::microseconds kSpin{200};

  // threads <= 1: every loop runs on the calling thread. spin 0: idle threads block at once (the
  // pool before 2026-12-01; bench/thread_pool_bench compares the two).
  explicit ThreadPool(int threads, std::chrono::microseconds spin = kSpin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint contiguous ranges covering [0, n), each range on one thread
  // (any of them); returns when all are done. Ranges smaller than min_chunk are not split
  // further. Not re-entrant.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  // Waits (spinning, then blocking) until the generation differs from `seen` or stop is set.
  uint64_t wait_for_job(uint64_t seen);
  // Claims and runs parts of the job of `generation` until none is left (or a newer job is up).
  void run_parts(uint64_t generation);
  // Polls `ready` until it holds or spin_ has passed; true when it holds.
  template <class Ready>
  bool spin_until(Ready ready) const;

  const std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;              // guards the sleeping side of wake_ and done_
  std::condition_variable wake_;  // a new generation, or stop
  std::condition_variable done_;  // every part of the current job is done
  // The job: written by parallel_for before it publishes the job's claim word (release), read
  // only by a thread that has claimed one of its parts (acquire); the caller rewrites it only
  // after every claimed part is done, and a part can no longer be claimed once the claim word
  // names a newer generation. So no thread reads a half-written job.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  // Generation (bits 32-63), number of parts (16-31) and next unclaimed part (0-15) of the job,
  // in one word so that a claim is one compare-and-swap that fails for an older job.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_parts_{0};       // parts of the current job finished
  std::atomic<uint64_t> generation_{0};  // wakes the workers
  std::atomic<bool> stop_{false};
};

}  // namespace flashdesk
