// kv_store_bench: the SSD KV block store's write and read throughput and latency for full-size
// blocks (256 tokens x 890 persisted bytes per token = 228 KB), sequential vs parallel readers,
// buffered vs O_DIRECT, cold (page cache dropped for the files) vs warm, against a same-run
// baseline: one plain sequential read() of the same bytes from one big file. Medians of --repeats.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_timing.h"
#include "storage/block_reader.h"
#include "storage/digest.h"
#include "storage/file_util.h"
#include "storage/kv_block_file.h"
#include "storage/kv_block_store.h"
#include "storage/session_store.h"

namespace fs = std::filesystem;
using namespace flashdesk::storage;
using Steady = std::chrono::steady_clock;

namespace {

using flashdesk::bench::median;
using flashdesk::bench::seconds_since;

struct Config {
  int blocks = 256;
  int tokens_per_block = 256;
  int bytes_per_token = 890;
  int repeats = 5;
  fs::path dir;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Asks the kernel to forget the file's cached pages (they are clean: every file was fsynced).
void drop_cache(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
}

std::vector<uint8_t> payload(int i, size_t n) {
  std::vector<uint8_t> p(n);
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
  for (size_t k = 0; k < n; k += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    for (size_t b = 0; b < 8 && k + b < n; ++b) p[k + b] = static_cast<uint8_t>(x >> (8 * b));
  }
  return p;
}

struct Prompt {
  std::vector<TokenId> tokens;
  std::vector<BlockKey> keys;
};

Prompt make_prompt(const Config& c, const std::string& fp, int seed) {
  Prompt p;
  for (int i = 0; i < c.blocks * c.tokens_per_block; ++i)
    p.tokens.push_back(
        static_cast<TokenId>((i * 2654435761u + static_cast<unsigned>(seed)) % 129280));
  p.keys = chain_block_keys(fp, p.tokens, {}, c.tokens_per_block);
  return p;
}

BlockWrite block(const Config& c, const std::string& fp, const Prompt& p, int i) {
  BlockWrite w;
  w.key = p.keys[static_cast<size_t>(i)];
  if (i > 0) w.parent = p.keys[static_cast<size_t>(i - 1)];
  w.model_fingerprint = fp;
  w.token_count = c.tokens_per_block;
  w.payload =
      payload(i, static_cast<size_t>(c.tokens_per_block) * static_cast<size_t>(c.bytes_per_token));
  return w;
}

struct Row {
  std::string what;
  double cold_mbps = 0, warm_mbps = 0;
};

void print_table(const std::vector<Row>& rows, double base_cold, double base_warm) {
  std::printf("\n| read path | cold MB/s | x baseline | warm MB/s | x baseline |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: |\n");
  for (const Row& r : rows)
    std::printf("| %s | %.0f | %.2f | %.0f | %.2f |\n", r.what.c_str(), r.cold_mbps,
                r.cold_mbps / base_cold, r.warm_mbps, r.warm_mbps / base_warm);
}

// Median MB/s of `read` over the repeats, dropping the page cache first when `cold`.
double measure(const Config& c, double bytes, bool cold, const std::vector<fs::path>& files,
               const std::function<void()>& read) {
  std::vector<double> mbps;
  for (int r = 0; r < c.repeats; ++r) {
    if (cold)
      for (const fs::path& f : files) drop_cache(f);
    const auto t = Steady::now();
    read();
    mbps.push_back(bytes / 1e6 / seconds_since(t));
  }
  return median(mbps);
}

void baseline_read(const fs::path& big, std::vector<uint8_t>& buf) {
  UniqueFd fd(::open(big.c_str(), O_RDONLY | O_CLOEXEC));
  while (::read(fd.get(), buf.data(), buf.size()) > 0) {
  }
}

// The same file read into fresh memory of its size (as a restore must: the bytes are kept).
void baseline_read_into_fresh_memory(const fs::path& big, size_t bytes) {
  ReadArena arena(bytes);
  UniqueFd fd(::open(big.c_str(), O_RDONLY | O_CLOEXEC));
  size_t done = 0;
  for (ssize_t n; done < bytes && (n = ::read(fd.get(), arena.data() + done,
                                              std::min<size_t>(1 << 20, bytes - done))) > 0;)
    done += static_cast<size_t>(n);
}

// The options, validated, and a fresh folder under --dir for the run.
Config parse_config(int argc, char** argv) {
  cxxopts::Options options("kv_store_bench", "SSD KV block store throughput and latency");
  options.add_options()("blocks", "blocks per run", cxxopts::value<int>()->default_value("256"))(
      "tokens-per-block", "tokens per block", cxxopts::value<int>()->default_value("256"))(
      "bytes-per-token", "persisted bytes per token", cxxopts::value<int>()->default_value("890"))(
      "repeats", "repeats per measurement (median)", cxxopts::value<int>()->default_value("5"))(
      "dir", "folder on the disk to measure (default: $TMPDIR or /var/tmp)",
      cxxopts::value<std::string>()->default_value(""));
  const auto opts = flashdesk::bench::parse_options(options, argc, argv);
  Config c;
  c.blocks = opts["blocks"].as<int>();
  c.tokens_per_block = opts["tokens-per-block"].as<int>();
  c.bytes_per_token = opts["bytes-per-token"].as<int>();
  c.repeats = std::max(1, opts["repeats"].as<int>());
  if (c.blocks < 1 || c.tokens_per_block < 1 || c.bytes_per_token < 1) {
    std::fprintf(stderr,
                 "kv_store_bench: --blocks, --tokens-per-block and --bytes-per-token "
                 "must be at least 1\n");
    std::exit(2);
  }
  std::string base = opts["dir"].as<std::string>();
  if (base.empty()) base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/var/tmp";
  std::string pattern = base + "/kv-bench-XXXXXX";
  if (!::mkdtemp(pattern.data())) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  c.dir = pattern;
  return c;
}

size_t block_file_bytes(const Config& c) {
  return kBlockHeaderSize +
         static_cast<size_t>(c.tokens_per_block) * static_cast<size_t>(c.bytes_per_token);
}

struct WriteResults {
  std::vector<double> one_ms;  // one block at a time, waiting for each
  double queued_mbps = 0;      // the whole prompt with the queue kept full
};

// Writes: one block at a time waiting for each (latency), then the queue kept full.
WriteResults measure_writes(const Config& c, const StorageLayout& layout,
                            const KvBlockStoreOptions& so, double total) {
  WriteResults w;
  KvBlockStore store(layout, so);
  const Prompt p = make_prompt(c, "bench-latency", 1);
  for (int i = 0; i < std::min(c.blocks, 64); ++i) {
    BlockWrite b = block(c, "bench-latency", p, i);
    const auto t = Steady::now();
    store.put(std::move(b)).get();
    w.one_ms.push_back(seconds_since(t) * 1e3);
  }
  const Prompt q = make_prompt(c, "bench", 2);
  std::vector<BlockWrite> writes;
  for (int i = 0; i < c.blocks; ++i) writes.push_back(block(c, "bench", q, i));
  const auto t = Steady::now();
  for (BlockWrite& b : writes) store.put(std::move(b));
  store.flush();
  w.queued_mbps = total / 1e6 / seconds_since(t);
  return w;
}

// The baseline (the same bytes in one file, read front to back with 1 MiB read() calls), then
// every block reader on the block files, cold and warm.
std::vector<Row> measure_readers(const Config& c, const std::vector<fs::path>& files,
                                 const std::vector<ReadRequest>& requests, double total) {
  const fs::path big = c.dir / "baseline.bin";
  {
    std::vector<uint8_t> all;
    for (const fs::path& f : files) {
      const auto b = read_whole_file(f);
      all.insert(all.end(), b.begin(), b.end());
    }
    const std::span<const uint8_t> parts[] = {all};
    write_file_atomic(big, parts);
  }
  std::vector<uint8_t> buf(1 << 20);
  std::vector<Row> rows{{"baseline: one file, sequential read() 1 MiB",
                         measure(c, total, true, {big}, [&] { baseline_read(big, buf); }),
                         measure(c, total, false, {big}, [&] { baseline_read(big, buf); })}};
  const auto big_bytes = static_cast<size_t>(total);
  rows.push_back(
      {"one file, read() into fresh memory of its size",
       measure(c, total, true, {big}, [&] { baseline_read_into_fresh_memory(big, big_bytes); }),
       measure(c, total, false, {big}, [&] { baseline_read_into_fresh_memory(big, big_bytes); })});
  const std::pair<ReadMethod, const char*> methods[] = {
      {ReadMethod::sequential, "sequential"},
      {ReadMethod::thread_pool, "thread pool (4)"},
      {ReadMethod::io_uring, "io_uring (QD 32)"}};
  for (bool direct : {false, true})
    for (const auto& [method, name] : methods) {
      std::unique_ptr<BlockReader> reader;
      try {
        reader = make_block_reader({method, 4, 32, direct});
      } catch (const flashdesk::Error& e) {
        std::printf("(%s not available: %s)\n", name, e.what());
        continue;
      }
      auto read = [&] { reader->read_all(requests); };
      rows.push_back({std::string("block files, ") + name + (direct ? ", O_DIRECT" : ""),
                      measure(c, total, true, files, read), measure(c, total, false, files, read)});
    }
  return rows;
}

// End to end, what the engine calls (index lookups, parallel reads, checksums, LRU update): the
// whole prompt as a table row, and one block at a time, cold, as latencies.
std::vector<double> measure_store_gets(const Config& c, const StorageLayout& layout,
                                       const KvBlockStoreOptions& so, const Prompt& q,
                                       const std::vector<fs::path>& files, double total,
                                       std::vector<Row>& rows) {
  KvBlockStore store(layout, so);
  auto get_all = [&] { store.get(q.keys); };
  rows.push_back(
      {std::string("KvBlockStore::get (") + std::string(store.reader_name()) + ", verified)",
       measure(c, total, true, files, get_all), measure(c, total, false, files, get_all)});
  std::vector<double> one_ms;
  for (size_t i = 0; i < std::min<size_t>(q.keys.size(), 64); ++i) {
    drop_cache(files[i]);
    const auto t = Steady::now();
    store.get(std::span(q.keys).subspan(i, 1));
    one_ms.push_back(seconds_since(t) * 1e3);
  }
  return one_ms;
}

// Checksum speed, for scale: every read verifies XXH3-64 over the payload. Median GB/s.
double checksum_gbps(const Config& c) {
  const auto sample = payload(7, 64 << 20);
  std::vector<double> gbps;
  for (int r = 0; r < c.repeats; ++r) {
    const auto t = Steady::now();
    volatile uint64_t h = xxh3_64(sample);
    (void)h;
    gbps.push_back(static_cast<double>(sample.size()) / 1e9 / seconds_since(t));
  }
  return median(gbps);
}

void print_latencies(const std::vector<double>& write_ms, const std::vector<double>& get_ms) {
  std::printf("\n| per block | median | p90 |\n| --- | ---: | ---: |\n");
  std::printf("| write one block (temp file, fsync, rename, index row) | %.2f ms | %.2f ms |\n",
              median(write_ms), percentile(write_ms, 0.9));
  std::printf("| get one block, cold (index, read, verify, LRU) | %.2f ms | %.2f ms |\n",
              median(get_ms), percentile(get_ms, 0.9));
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = parse_config(argc, argv);
  const StorageLayout layout = StorageLayout::in(c.dir);
  const size_t file_bytes = block_file_bytes(c);
  const double total = static_cast<double>(file_bytes) * c.blocks;
  std::printf(
      "kv_store_bench: %d blocks of %d tokens x %d B = %zu B per block file, %.1f MB in "
      "all, folder %s\n",
      c.blocks, c.tokens_per_block, c.bytes_per_token, file_bytes, total / 1e6, c.dir.c_str());
  { SessionStore sessions(layout); }
  KvBlockStoreOptions so;
  so.tokens_per_block = c.tokens_per_block;

  const WriteResults writes = measure_writes(c, layout, so, total);
  const Prompt q = make_prompt(c, "bench", 2);  // the prompt measure_writes queued
  std::vector<fs::path> files;
  std::vector<ReadRequest> requests;
  for (const BlockKey& k : q.keys) {
    files.push_back(block_file_path(layout.kv_dir(), k));
    requests.push_back({files.back(), file_bytes});
  }
  std::vector<Row> rows = measure_readers(c, files, requests, total);
  const std::vector<double> get_ms = measure_store_gets(c, layout, so, q, files, total, rows);
  print_table(rows, rows[0].cold_mbps, rows[0].warm_mbps);
  print_latencies(writes.one_ms, get_ms);
  std::printf(
      "\nwrites with the queue kept full: %.0f MB/s (%.1f blocks/s); XXH3-64 checksum: "
      "%.1f GB/s\n",
      writes.queued_mbps, writes.queued_mbps * 1e6 / static_cast<double>(file_bytes),
      checksum_gbps(c));
  std::error_code ec;
  fs::remove_all(c.dir, ec);
  return 0;
}
