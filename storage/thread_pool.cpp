// The worker threads of ThreadPool.
#include "storage/thread_pool.h"

#include <latch>

#include "engine/util/error.h"

namespace flashdesk::storage {

ThreadPool::ThreadPool(int threads) {
  FD_CHECK(threads > 0, "a thread pool needs at least one thread");
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_all(std::vector<std::function<void()>> jobs) {
  std::latch done(static_cast<std::ptrdiff_t>(jobs.size()));
  {
    std::lock_guard lock(mutex_);
    for (auto& job : jobs)
      queue_.push_back([&done, job = std::move(job)] {
        job();
        done.count_down();
      });
  }
  wake_.notify_all();
  done.wait();
}

void ThreadPool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace flashdesk::storage
