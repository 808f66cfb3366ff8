// The on-disk cache of built Engram token maps: written on the first build, read on the next,
// and rebuilt (never trusted) when the file is truncated, altered, garbage or another
// tokenizer's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/safetensors_writer.h"
#include "engine/model/engram_map_cache.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

using testing::TempDir;

#ifndef FLASHDESK_HAVE_ICU
// A build without ICU (engine/CMakeLists.txt; the GPU machine's engine-only build) builds no
// Engram map from tokenizer.json, so there is nothing to cache.
TEST(EngramMapCacheWithoutIcu, Skipped) {
  GTEST_SKIP() << "built without ICU: no Engram map from tokenizer.json";
}
#else

const Tokenizer& flash_tiny_tokenizer() {
  static const Tokenizer t = Tokenizer::from_file(std::filesystem::path(FD_SOURCE_DIR) /
                                                  "assets/models/flash-tiny/tokenizer.json");
  return t;
}

class EngramMapCache : public ::testing::Test {
 protected:
  const Tokenizer& tok_ = flash_tiny_tokenizer();
  TempDir dir_;
  std::filesystem::path file_ = engram_map_cache_file(dir_.path() / "engram", tok_);
  CompressedTokenMap built_ = build_compressed_token_map(tok_);

  CachedTokenMap load() { return cached_compressed_token_map(tok_, dir_.path() / "engram"); }

  // After a damaged file: rebuilt, equal to a fresh build, and the file is good again.
  void expect_rebuilt(const std::string& why) {
    const CachedTokenMap m = load();
    EXPECT_EQ(m.origin, TokenMapOrigin::Built) << why;
    EXPECT_NE(m.note.find("rebuilt"), std::string::npos) << why << ": " << m.note;
    EXPECT_EQ(m.map.ids, built_.ids) << why;
    EXPECT_EQ(m.map.size, built_.size) << why;
    EXPECT_EQ(load().origin, TokenMapOrigin::Cache) << why << ": the rewritten file is used";
  }
};

TEST_F(EngramMapCache, FirstLoadBuildsAndWritesThenReads) {
  const CachedTokenMap first = load();
  EXPECT_EQ(first.origin, TokenMapOrigin::Built);
  EXPECT_EQ(first.note, "");
  EXPECT_TRUE(std::filesystem::exists(file_));
  const CachedTokenMap second = load();
  EXPECT_EQ(second.origin, TokenMapOrigin::Cache);
  EXPECT_EQ(second.map.ids, built_.ids);
  EXPECT_EQ(second.map.size, 6864);
  SafetensorsFile f(file_);
  EXPECT_EQ(f.metadata().at("tokenizer_sha256"), tok_.sha256());
  EXPECT_EQ(f.metadata().at("compressed_vocab_size"), "6864");
}

TEST_F(EngramMapCache, NoCacheDirBuildsWithoutWriting) {
  const CachedTokenMap m = cached_compressed_token_map(tok_, {});
  EXPECT_EQ(m.origin, TokenMapOrigin::Built);
  EXPECT_EQ(m.map.ids, built_.ids);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "engram"));
}

TEST_F(EngramMapCache, TruncatedFileIsRebuilt) {
  load();
  const auto bytes = testing::read_bytes(file_);
  for (size_t keep : {size_t{0}, size_t{5}, size_t{200}, bytes.size() - 8}) {
    testing::write_bytes(file_, bytes.data(), keep);
    expect_rebuilt("truncated to " + std::to_string(keep) + " bytes");
  }
}

TEST_F(EngramMapCache, AlteredMapBytesAreRebuilt) {
  load();
  auto bytes = testing::read_bytes(file_);
  bytes[bytes.size() - 3] ^= 0x01;  // inside the last token's id: still a plausible map
  testing::write_bytes(file_, bytes.data(), bytes.size());
  expect_rebuilt("one flipped bit");
}

TEST_F(EngramMapCache, GarbageAndDirectoriesAreRebuiltOrSkipped) {
  std::filesystem::create_directories(file_.parent_path());
  const std::string junk = "not a safetensors file at all, just text";
  testing::write_bytes(file_, junk.data(), junk.size());
  expect_rebuilt("garbage");
}

// A well-formed file that describes another tokenizer, Unicode version or numbering.
TEST_F(EngramMapCache, FilesForOtherInputsAreRebuilt) {
  auto write = [&](std::map<std::string, std::string> meta, const std::vector<int64_t>& ids) {
    TensorData t{"token_map", DType::I64, {static_cast<int64_t>(ids.size())}, {}};
    t.bytes.resize(ids.size() * 8);
    std::memcpy(t.bytes.data(), ids.data(), t.bytes.size());
    write_safetensors(file_, {t}, meta);
  };
  load();
  const auto good = SafetensorsFile(file_).metadata();
  auto other_tokenizer = good;
  other_tokenizer["tokenizer_sha256"] = std::string(64, '0');
  write(other_tokenizer, built_.ids);
  expect_rebuilt("another tokenizer's hash");
  auto other_unicode = good;
  other_unicode["unicode_version"] = "9.0";
  write(other_unicode, built_.ids);
  expect_rebuilt("another Unicode version");
  write(good, std::vector<int64_t>(built_.ids.begin(), built_.ids.end() - 1));
  expect_rebuilt("one entry short");
  auto no_format = good;
  no_format.erase("format");
  write(no_format, built_.ids);
  expect_rebuilt("no format tag");
}

TEST_F(EngramMapCache, UnwritableCacheStillGivesTheMap) {
  // A file where the cache folder should be: the folder cannot be made.
  testing::write_bytes(dir_.path() / "engram", "x", 1);
  const CachedTokenMap m = load();
  EXPECT_EQ(m.map.ids, built_.ids);
  EXPECT_NE(m.note.find("not cached"), std::string::npos) << m.note;
}

#endif  // FLASHDESK_HAVE_ICU

}  // namespace
}  // namespace flashdesk
