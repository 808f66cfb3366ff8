// The pread-based block readers (sequential, thread pool) and the reader factory.
#include "storage/block_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <new>

#include "storage/file_util.h"
#include "storage/thread_pool.h"

namespace flashdesk::storage {

namespace {
size_t round_up(size_t n) {
  return (n + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
}
}  // namespace

constexpr size_t kHugePage = size_t{2} << 20;

void ReadArena::Free::operator()(uint8_t* p) const {
  std::free(p);
}

ReadArena::ReadArena(size_t bytes) : size_(bytes) {
  const size_t alignment = bytes >= kHugePage ? kHugePage : kIoAlignment;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = nullptr;
  if (::posix_memalign(&p, alignment, rounded == 0 ? alignment : rounded) != 0)
    throw std::bad_alloc();
  data_.reset(static_cast<uint8_t*>(p));
  if (rounded >= kHugePage) ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: may be ignored
}

ReadBatch make_read_batch(std::span<const ReadRequest> requests) {
  ReadBatch batch;
  std::vector<size_t> slot_sizes;
  size_t total = 0;
  for (const ReadRequest& r : requests) {
    // One page beyond the expected size shows a file that grew (it then fails verification).
    slot_sizes.push_back(round_up(r.expected_size + kIoAlignment));
    total += slot_sizes.back();
  }
  batch.arena = std::make_shared<ReadArena>(total);
  batch.results.resize(requests.size());
  size_t offset = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    batch.results[i].slot = {batch.arena->data() + offset, slot_sizes[i]};
    offset += slot_sizes[i];
  }
  return batch;
}

int open_for_read(const std::filesystem::path& path, bool direct_io) {
  if (direct_io) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd >= 0 || errno != EINVAL) return fd;  // EINVAL: the file system has no O_DIRECT
  }
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

void read_file_pread(const ReadRequest& request, bool direct_io, ReadResult& result) {
  UniqueFd fd(open_for_read(request.path, direct_io));
  if (!fd) {
    result.error = errno;
    return;
  }
  size_t done = 0;
  while (done < result.slot.size()) {
    const ssize_t n = ::pread(fd.get(), result.slot.data() + done, result.slot.size() - done,
                              static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result.error = errno;
      break;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
    if (done % kIoAlignment != 0) break;  // a short read that is not page-aligned ends the file
  }
  result.size = done;
}

namespace {

class SequentialReader final : public BlockReader {
 public:
  explicit SequentialReader(bool direct_io) : direct_io_(direct_io) {}
  ReadBatch read_all(std::span<const ReadRequest> requests) override {
    ReadBatch batch = make_read_batch(requests);
    for (size_t i = 0; i < requests.size(); ++i)
      read_file_pread(requests[i], direct_io_, batch.results[i]);
    return batch;
  }
  std::string_view name() const override { return direct_io_ ? "pread-seq-direct" : "pread-seq"; }

 private:
  bool direct_io_;
};

class ThreadPoolReader final : public BlockReader {
 public:
  ThreadPoolReader(int threads, bool direct_io) : pool_(threads), direct_io_(direct_io) {}
  ReadBatch read_all(std::span<const ReadRequest> requests) override {
    ReadBatch batch = make_read_batch(requests);
    std::vector<std::function<void()>> jobs;
    jobs.reserve(requests.size());
    for (size_t i = 0; i < requests.size(); ++i)
      jobs.push_back([&, i] { read_file_pread(requests[i], direct_io_, batch.results[i]); });
    pool_.run_all(std::move(jobs));
    return batch;
  }
  std::string_view name() const override { return direct_io_ ? "pread-pool-direct" : "pread-pool"; }

 private:
  ThreadPool pool_;
  bool direct_io_;
};

}  // namespace

#ifndef FLASHDESK_HAVE_LIBURING
std::unique_ptr<BlockReader> make_uring_reader(const ReaderOptions&) {
  return nullptr;
}
#endif

std::unique_ptr<BlockReader> make_block_reader(const ReaderOptions& options) {
  switch (options.method) {
    case ReadMethod::sequential:
      return std::make_unique<SequentialReader>(options.direct_io);
    case ReadMethod::thread_pool:
      return std::make_unique<ThreadPoolReader>(options.threads, options.direct_io);
    case ReadMethod::io_uring:
      if (auto reader = make_uring_reader(options)) return reader;
      throw IoError("io_uring is not available (not built in, or refused by the kernel)");
    case ReadMethod::automatic:
      if (auto reader = make_uring_reader(options)) return reader;
      return std::make_unique<ThreadPoolReader>(options.threads, options.direct_io);
  }
  return nullptr;
}

}  // namespace flashdesk::storage
