// First come, first served access to the one engine: each request takes a ticket and waits for
// its turn, so concurrent clients are answered in arrival order and none is dropped.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace flashdesk::server {

class TurnQueue {
 public:
  // Holds the engine until destroyed.
  class Turn {
   public:
    explicit Turn(TurnQueue& queue) : queue_(queue) {}
    ~Turn() { queue_.release(); }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    TurnQueue& queue_;
  };

  // Blocks until every earlier ticket's turn has ended.
  std::unique_ptr<Turn> wait() {
    std::unique_lock lock(mutex_);
    const uint64_t ticket = next_ticket_++;
    ++waiting_;
    changed_.wait(lock, [&] { return serving_ == ticket; });
    --waiting_;
    return std::make_unique<Turn>(*this);
  }

  // Requests waiting for their turn (for the log).
  int64_t waiting() const {
    std::lock_guard lock(mutex_);
    return waiting_;
  }

 private:
  void release() {
    {
      std::lock_guard lock(mutex_);
      ++serving_;
    }
    changed_.notify_all();
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ = 0;
  int64_t waiting_ = 0;
};

}  // namespace flashdesk::server
