// The weights in the checkpoint fingerprint: one changed weight byte changes it, the digest cache
// serves a second open without reading the weights and never hides a change, sparse holes hash as
// the zeros they read as, and a damaged cache file is named and replaced.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/weight_digest.h"
#include "engine/checkpoint/weight_digest_cache.h"
#include "engine/util/error.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

using testing::TempDir;

const std::filesystem::path kEveryRole = testing::config_asset("test-every-role.json");

// XORs one byte in the middle of `tensor`'s data in place (the header stays byte-identical).
void flip_weight_byte(const std::filesystem::path& file, const std::string& tensor) {
  uint64_t offset = 0;
  {
    const SafetensorsFile f(file);
    const SafetensorsEntry* e = f.find(tensor);
    ASSERT_NE(e, nullptr) << tensor;
    offset = e->offset + e->nbytes / 2;
  }
  const int fd = ::open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
  b ^= 0x01;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

CheckpointOptions options_with_cache(const std::filesystem::path& cache) {
  CheckpointOptions o;
  o.digest_cache = cache;
  return o;
}

// Files written now are too fresh to be cached (kRacyMarginNs); a test of the cache waits it out.
void wait_until_files_may_be_cached() {
  std::this_thread::sleep_for(std::chrono::nanoseconds(kRacyMarginNs + 100'000'000));
}

TEST(WeightDigest, OneChangedWeightByteGivesAnotherFingerprint) {
  TempDir dir;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(11));
  const CheckpointOptions no_cache = options_with_cache({});
  const std::string before = Checkpoint::open(dir.path(), no_cache)->fingerprint();
  const std::string header_before = testing::read_text(dir / "model.safetensors").substr(0, 4096);
  flip_weight_byte(dir / "model.safetensors", "layers.3.ffn.experts.1.w2.weight");
  ASSERT_EQ(testing::read_text(dir / "model.safetensors").substr(0, 4096), header_before);
  const std::string after = Checkpoint::open(dir.path(), no_cache)->fingerprint();
  EXPECT_NE(after, before);
  flip_weight_byte(dir / "model.safetensors", "layers.3.ffn.experts.1.w2.weight");  // back
  EXPECT_EQ(Checkpoint::open(dir.path(), no_cache)->fingerprint(), before);
  // A mapped file gives the same digest as a copied one (read through its descriptor).
  CheckpointOptions mapped = no_cache;
  mapped.copy_files_up_to = 0;
  EXPECT_EQ(Checkpoint::open(dir.path(), mapped)->fingerprint(), before);
}

TEST(WeightDigest, CacheServesTheSecondOpenAndNeverHidesAChange) {
  TempDir dir, home;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(12));
  const std::filesystem::path cache = home / "weight-digests.tsv";
  wait_until_files_may_be_cached();
  const auto first = Checkpoint::open(dir.path(), options_with_cache(cache));
  const WeightDigestReport& r1 = first->weight_digest_report();
  EXPECT_EQ(r1.files, 2u);  // model.safetensors + engram_map.safetensors
  EXPECT_EQ(r1.from_cache, 0u);
  EXPECT_EQ(r1.bytes_read, std::filesystem::file_size(dir / "model.safetensors") +
                               std::filesystem::file_size(dir / "engram_map.safetensors"));
  EXPECT_TRUE(r1.cache_note.empty()) << r1.cache_note;
  ASSERT_TRUE(std::filesystem::exists(cache));

  const auto second = Checkpoint::open(dir.path(), options_with_cache(cache));
  EXPECT_EQ(second->weight_digest_report().from_cache, 2u);
  EXPECT_EQ(second->weight_digest_report().bytes_read, 0u);
  EXPECT_EQ(second->fingerprint(), first->fingerprint());

  // The cache is what the second open used: a digest edited in it shows in the fingerprint.
  std::string text = testing::read_text(cache);
  const size_t line = text.find('\n') + 1;
  text[line] = text[line] == '0' ? '1' : '0';
  testing::write_text(cache, text);
  EXPECT_NE(Checkpoint::open(dir.path(), options_with_cache(cache))->fingerprint(),
            first->fingerprint());

  // A weight byte changed with the size and modification time put back: the change time gives
  // it away, the file is read again and the fingerprint moves.
  const auto model = dir / "model.safetensors";
  struct stat st {};
  ASSERT_EQ(::stat(model.c_str(), &st), 0);
  flip_weight_byte(model, "embed.weight");
  const timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, model.c_str(), times, 0), 0);
  const auto changed = Checkpoint::open(dir.path(), options_with_cache(cache));
  EXPECT_EQ(changed->weight_digest_report().from_cache, 1u);  // the Engram map only
  EXPECT_EQ(changed->weight_digest_report().bytes_read, std::filesystem::file_size(model));
  EXPECT_NE(changed->fingerprint(), first->fingerprint());
}

TEST(WeightDigest, FreshlyWrittenFilesAreNotCached) {
  TempDir dir, home;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(13));
  const std::filesystem::path cache = home / "weight-digests.tsv";
  Checkpoint::open(dir.path(), options_with_cache(cache));
  const auto again = Checkpoint::open(dir.path(), options_with_cache(cache));
  EXPECT_EQ(again->weight_digest_report().from_cache, 0u);  // written < 2 s ago: may still change
  EXPECT_GT(again->weight_digest_report().bytes_read, 0u);
}

TEST(WeightDigest, DamagedCacheIsNamedAndReplaced) {
  TempDir dir, home;
  write_random_checkpoint(kEveryRole, dir.path(), testing::random_options(14));
  const std::filesystem::path cache = home / "weight-digests.tsv";
  testing::write_text(cache, "flashdesk-weight-digests 1\nnot a digest\n");
  wait_until_files_may_be_cached();
  const auto ckpt = Checkpoint::open(dir.path(), options_with_cache(cache));
  const std::string note = ckpt->weight_digest_report().cache_note;
  EXPECT_NE(note.find(cache.string() + ": line 2: expected 7 tab-separated fields"),
            std::string::npos)
      << note;
  EXPECT_NO_THROW(WeightDigestCache::load(cache));  // rewritten whole
  EXPECT_EQ(WeightDigestCache::load(cache).size(), 2u);
}

TEST(WeightDigestCache, MalformedLinesAreFormatErrorsNamingTheLine) {
  const std::string digest(64, 'a');
  auto error = [](const std::string& text) {
    try {
      WeightDigestCache::parse(text, "/c/weights.tsv");
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(""), "/c/weights.tsv: empty file; expected 'flashdesk-weight-digests 1'");
  EXPECT_EQ(error("flashdesk-weight-digests 2\n"),
            "/c/weights.tsv: line 1: expected 'flashdesk-weight-digests 1'");
  const std::string head = "flashdesk-weight-digests 1\n";
  EXPECT_EQ(error(head + "ABC\t1\t2\t3\t4\t5\t/m\n"),
            "/c/weights.tsv: line 2: 'ABC' is not 64 lower-case hex digits");
  EXPECT_EQ(error(head + digest + "\t1\tx\t3\t4\t5\t/m\n"),
            "/c/weights.tsv: line 2: size, times, device and inode must be whole numbers");
  EXPECT_EQ(error(head + digest + "\t1\t2\t3\t4\t5\tm\n"),
            "/c/weights.tsv: line 2: 'm' is not an absolute path");
  const auto ok = WeightDigestCache::parse(head + digest + "\t1\t2\t3\t4\t5\t/m\tx\n", "c");
  EXPECT_EQ(ok.size(), 1u);  // a path may hold a tab
  EXPECT_EQ(ok.text(), head + digest + "\t1\t2\t3\t4\t5\t/m\tx\n");
}

TEST(WeightDigest, HolesHashAsTheZerosTheyReadAs) {
  TempDir dir;
  const auto file = dir / "sparse.bin";
  {
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(2 * kDigestChunkBytes + 12345)), 0);
    const char data[] = "weights";
    ASSERT_EQ(::pwrite(fd, data, sizeof data, static_cast<off_t>(kDigestChunkBytes + 7)),
              static_cast<ssize_t>(sizeof data));
    ::close(fd);
  }
  const MappedFile mapped(file, 0), copied(file, 4 * kDigestChunkBytes);
  ASSERT_FALSE(mapped.copied());
  ASSERT_TRUE(copied.copied());
  const MappedFile* a[] = {&mapped};
  const MappedFile* b[] = {&copied};
  const WeightDigests from_holes = digest_weight_files(a, {});
  const WeightDigests from_memory = digest_weight_files(b, {});
  EXPECT_EQ(from_holes.digests, from_memory.digests);
  EXPECT_LT(from_holes.report.bytes_read, kDigestChunkBytes + 1);  // only the chunk with data
  EXPECT_EQ(from_memory.report.bytes_read, copied.size());
}

}  // namespace
}  // namespace flashdesk
