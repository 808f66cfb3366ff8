// The io_uring block reader: one ring per call, up to queue_depth whole-file reads in flight.
#include <liburing.h>

#include <cerrno>
#include <deque>

#include "storage/block_reader.h"
#include "storage/file_util.h"

namespace flashdesk::storage {

namespace {

class Ring {
 public:
  explicit Ring(unsigned entries) { error_ = -io_uring_queue_init(entries, &ring_, 0); }
  ~Ring() {
    if (error_ == 0) io_uring_queue_exit(&ring_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  int error() const { return error_; }
  io_uring* get() { return &ring_; }

 private:
  io_uring ring_{};
  int error_ = 0;
};

struct Slot {
  UniqueFd fd;
  size_t done = 0;
  bool finished = false;
};

class UringReader final : public BlockReader {
 public:
  explicit UringReader(const ReaderOptions& options) : options_(options) {}

  ReadBatch read_all(std::span<const ReadRequest> requests) override {
    ReadBatch batch = make_read_batch(requests);
    std::vector<ReadResult>& results = batch.results;
    std::vector<Slot> slots(requests.size());
    std::deque<size_t> ready;  // reads to (re)submit
    for (size_t i = 0; i < requests.size(); ++i) {
      slots[i].fd = UniqueFd(open_for_read(requests[i].path, options_.direct_io));
      if (!slots[i].fd)
        results[i].error = errno;
      else
        ready.push_back(i);
    }
    const unsigned depth =
        static_cast<unsigned>(options_.queue_depth > 0 ? options_.queue_depth : 1);
    Ring ring(depth);
    if (ring.error() != 0) return fall_back(requests);
    size_t in_flight = 0;
    while (!ready.empty() || in_flight > 0) {
      while (!ready.empty() && in_flight < depth) {
        submit(ring, slots[ready.front()], results[ready.front()], ready.front());
        ready.pop_front();
        ++in_flight;
      }
      io_uring_submit(ring.get());
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(ring.get(), &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) return fall_back(requests);
      const auto i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      complete(slots[i], results[i], cqe->res, ready, i);
      io_uring_cqe_seen(ring.get(), cqe);
      --in_flight;
    }
    for (size_t i = 0; i < results.size(); ++i) results[i].size = slots[i].done;
    return batch;
  }

  std::string_view name() const override {
    return options_.direct_io ? "io_uring-direct" : "io_uring";
  }

 private:
  static void submit(Ring& ring, const Slot& slot, ReadResult& result, size_t i) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
    io_uring_prep_read(sqe, slot.fd.get(), result.slot.data() + slot.done,
                       static_cast<unsigned>(result.slot.size() - slot.done), slot.done);
    io_uring_sqe_set_data64(sqe, i);
  }

  // A read ends at end of file (0), at a short read that is not page-aligned, or when the buffer
  // is full; otherwise the rest is submitted again.
  static void complete(Slot& slot, ReadResult& result, int res, std::deque<size_t>& ready,
                       size_t i) {
    if (res == -EINTR || res == -EAGAIN) {
      ready.push_back(i);
      return;
    }
    if (res < 0) {
      result.error = -res;
      return;
    }
    slot.done += static_cast<size_t>(res);
    const bool more = res > 0 && slot.done % kIoAlignment == 0 && slot.done < result.slot.size();
    if (more) ready.push_back(i);
  }

  ReadBatch fall_back(std::span<const ReadRequest> requests) {
    ReadBatch batch = make_read_batch(requests);
    for (size_t i = 0; i < requests.size(); ++i)
      read_file_pread(requests[i], options_.direct_io, batch.results[i]);
    return batch;
  }

  ReaderOptions options_;
};

}  // namespace

std::unique_ptr<BlockReader> make_uring_reader(const ReaderOptions& options) {
  Ring probe(1);  // seccomp or a kernel switch may forbid io_uring even when it is built in
  if (probe.error() != 0) return nullptr;
  return std::make_unique<UringReader>(options);
}

}  // namespace flashdesk::storage
