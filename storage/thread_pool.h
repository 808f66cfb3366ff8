// A fixed set of worker threads running queued jobs (the pread fallback of parallel block reads).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flashdesk::storage {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();  // finishes the queued jobs, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs every job on the pool and returns when all are done. Jobs must not throw.
  void run_all(std::vector<std::function<void()>> jobs);
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace flashdesk::storage
