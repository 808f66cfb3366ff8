// Hashing safetensors files in chunks on a few threads, with the identity-keyed cache.
#include "engine/checkpoint/weight_digest.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "engine/checkpoint/weight_digest_cache.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

constexpr size_t kReadBytes = size_t{4} << 20;
constexpr int kMaxThreads = 8;

const std::vector<uint8_t>& zeros() {
  static const std::vector<uint8_t> z(kReadBytes, 0);
  return z;
}

// SHA-256 of n zero bytes for every n in `lengths`, in one pass over the longest: the running
// state is copied and finished at each length (a sparse checkpoint has a hole at the end of most
// files, each of another length; hashing each from scratch cost seconds).
std::map<uint64_t, Sha256::Digest> digests_of_zeros(std::vector<uint64_t> lengths) {
  std::sort(lengths.begin(), lengths.end());
  std::map<uint64_t, Sha256::Digest> out;
  Sha256 h;
  uint64_t done = 0;
  for (uint64_t n : lengths) {
    while (done < n) {
      const uint64_t take = std::min<uint64_t>(n - done, kReadBytes);
      h.update(std::span(zeros()).first(static_cast<size_t>(take)));
      done += take;
    }
    Sha256 at_n = h;
    out.emplace(n, at_n.finish());
  }
  return out;
}

// Whether [begin, end) of the descriptor's file lies wholly in a hole (reads as zeros).
bool in_hole(int fd, uint64_t begin, uint64_t end) {
  const off_t data = ::lseek(fd, static_cast<off_t>(begin), SEEK_DATA);
  if (data < 0) return errno == ENXIO;  // no data after begin (other errors: read it)
  return static_cast<uint64_t>(data) >= end;
}

struct Chunk {
  size_t file = 0;
  uint64_t begin = 0, end = 0;
};

class ChunkHasher {
 public:
  // `zero_digests`: the digest of every length of chunk that lies in a hole.
  ChunkHasher(std::span<const MappedFile* const> files,
              std::map<uint64_t, Sha256::Digest> zero_digests)
      : files_(files), zero_digests_(std::move(zero_digests)) {}

  // SHA-256 of one chunk; adds the bytes it read to `bytes_read`.
  Sha256::Digest hash(const Chunk& c, std::vector<uint8_t>& buffer, uint64_t& bytes_read) const {
    const MappedFile& f = *files_[c.file];
    Sha256 h;
    if (f.copied()) {
      h.update(
          f.bytes().subspan(static_cast<size_t>(c.begin), static_cast<size_t>(c.end - c.begin)));
      bytes_read += c.end - c.begin;
      return h.finish();
    }
    if (in_hole(f.fd(), c.begin, c.end)) return zero_digests_.at(c.end - c.begin);
    for (uint64_t at = c.begin; at < c.end;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(c.end - at, buffer.size()));
      const ssize_t n = ::pread(f.fd(), buffer.data(), want, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError(f.path().string() + ": cannot read: " + std::strerror(errno));
      if (n == 0)
        throw IoError(f.path().string() + ": the file shrank while it was being hashed (at byte " +
                      std::to_string(at) + " of " + std::to_string(f.size()) + ")");
      h.update(std::span(buffer).first(static_cast<size_t>(n)));
      at += static_cast<uint64_t>(n);
      bytes_read += static_cast<uint64_t>(n);
    }
    return h.finish();
  }

 private:
  std::span<const MappedFile* const> files_;
  std::map<uint64_t, Sha256::Digest> zero_digests_;
};

// Every length of chunk that could lie in a hole: those of mapped files (copied ones are hashed
// from memory).
std::vector<uint64_t> hole_lengths(std::span<const MappedFile* const> files,
                                   const std::vector<Chunk>& chunks) {
  std::vector<uint64_t> lengths;
  for (const Chunk& c : chunks)
    if (!files[c.file]->copied()) lengths.push_back(c.end - c.begin);
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  return lengths;
}

Sha256::Digest combine(const MappedFile& f, std::span<const Sha256::Digest> chunks) {
  Sha256 h;
  h.update("flashdesk-file-digest-v1\n");
  h.update_u64(f.size());
  h.update_u64(kDigestChunkBytes);
  for (const Sha256::Digest& d : chunks) h.update(d);
  return h.finish();
}

// Hashes `chunks` on up to kMaxThreads threads; results by chunk index.
std::vector<Sha256::Digest> hash_chunks(const ChunkHasher& hasher, const std::vector<Chunk>& chunks,
                                        int threads, uint64_t& bytes_read) {
  std::vector<Sha256::Digest> out(chunks.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> total{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    std::vector<uint8_t> buffer(kReadBytes);
    uint64_t mine = 0;
    try {
      for (size_t i = next++; i < chunks.size(); i = next++)
        out[i] = hasher.hash(chunks[i], buffer, mine);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = chunks.size();
    }
    total += mine;
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  bytes_read = total;
  return out;
}

}  // namespace

WeightDigests digest_weight_files(std::span<const MappedFile* const> files,
                                  const std::filesystem::path& cache_file) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t started_ns = realtime_now_ns();
  WeightDigests result;
  result.digests.resize(files.size());
  result.report.files = files.size();
  WeightDigestCache cache;
  bool rewrite = false;  // a damaged cache is replaced: its entries can all be computed again
  if (!cache_file.empty()) {
    try {
      cache = WeightDigestCache::load(cache_file);
    } catch (const Error& e) {
      result.report.cache_note = std::string("ignored the weight digest cache: ") + e.what();
      rewrite = true;
    }
  }
  std::vector<size_t> to_hash;
  for (size_t i = 0; i < files.size(); ++i) {
    if (auto d = cache.find(files[i]->path(), files[i]->identity())) {
      result.digests[i] = *d;
      ++result.report.from_cache;
    } else {
      to_hash.push_back(i);
    }
  }
  std::vector<Chunk> chunks;
  std::vector<size_t> first_chunk(files.size(), 0);
  for (size_t i : to_hash) {
    first_chunk[i] = chunks.size();
    for (uint64_t b = 0; b < files[i]->size(); b += kDigestChunkBytes)
      chunks.push_back({i, b, std::min<uint64_t>(b + kDigestChunkBytes, files[i]->size())});
  }
  const int threads = static_cast<int>(
      std::clamp<size_t>(std::min<size_t>(std::thread::hardware_concurrency(), kMaxThreads), 1,
                         std::max<size_t>(chunks.size(), 1)));
  const std::vector<Sha256::Digest> chunk_digests =
      hash_chunks(ChunkHasher(files, digests_of_zeros(hole_lengths(files, chunks))), chunks,
                  threads, result.report.bytes_read);
  bool cache_changed = false;
  for (size_t i : to_hash) {
    const size_t n = (files[i]->size() + kDigestChunkBytes - 1) / kDigestChunkBytes;
    result.digests[i] = combine(*files[i], std::span(chunk_digests).subspan(first_chunk[i], n));
    cache_changed |=
        cache.put(files[i]->path(), files[i]->identity(), result.digests[i], started_ns);
  }
  if (!cache_file.empty() && (cache_changed || rewrite)) {
    try {
      cache.save(cache_file);
    } catch (const Error& e) {
      if (!result.report.cache_note.empty()) result.report.cache_note += "; ";
      result.report.cache_note +=
          std::string("could not save the weight digest cache: ") + e.what();
    }
  }
  result.report.threads = chunks.empty() ? 0 : threads;
  result.report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace flashdesk
