// MappedFile, the crash-safe writer and SHA-256 (FIPS 180-4 test vectors).
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "engine/util/error.h"
#include "engine/util/file_io.h"
#include "engine/util/mapped_file.h"
#include "engine/util/sha256.h"
#include "engine/util/sha256_blocks.h"
#include "tests/engine/checkpoint_test_util.h"

namespace flashdesk {
namespace {

using testing::TempDir;

TEST(MappedFile, MapsContents) {
  TempDir dir;
  testing::write_text(dir / "a.bin", "hello mapped world");
  MappedFile f(dir / "a.bin");
  ASSERT_EQ(f.size(), 18u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data()), f.size()), "hello mapped world");
  MappedFile moved(std::move(f));
  EXPECT_EQ(moved.size(), 18u);
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(moved.bytes()[0], 'h');
}

TEST(MappedFile, EmptyFileIsAnEmptySpan) {
  TempDir dir;
  testing::write_text(dir / "empty", "");
  MappedFile f(dir / "empty");
  EXPECT_EQ(f.size(), 0u);
  EXPECT_TRUE(f.bytes().empty());
}

TEST(MappedFile, MissingFileNamesIt) {
  TempDir dir;
  try {
    MappedFile f(dir / "nope.safetensors");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("nope.safetensors"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MappedFile{dir.path()}, IoError);  // a directory is not a file
}

TEST(MappedFile, SmallFilesAreCopiedLargeOnesMapped) {
  TempDir dir;
  testing::write_text(dir / "a.bin", std::string(5000, 'w'));
  MappedFile copied(dir / "a.bin");  // under kDefaultCopyLimit
  MappedFile mapped(dir / "a.bin", 4999);
  EXPECT_TRUE(copied.copied());
  EXPECT_FALSE(mapped.copied());
  EXPECT_EQ(copied.identity(), mapped.identity());
  EXPECT_EQ(copied.identity().size, 5000u);
  // The copy does not change with the file.
  testing::write_text(dir / "a.bin", "shorter");
  EXPECT_EQ(copied.size(), 5000u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(copied.data()), 5000),
            std::string(5000, 'w'));
}

TEST(AtomicFileWriter, AppearsOnlyOnCommit) {
  TempDir dir;
  {
    AtomicFileWriter w(dir / "out.bin");
    const uint8_t bytes[3] = {1, 2, 3};
    w.resize(6);
    w.write_at(3, bytes);
    EXPECT_FALSE(std::filesystem::exists(dir / "out.bin"));
    w.commit();
  }
  EXPECT_EQ(testing::read_bytes(dir / "out.bin"), (std::vector<uint8_t>{0, 0, 0, 1, 2, 3}));
  { AtomicFileWriter abandoned(dir / "other.bin"); }
  EXPECT_FALSE(std::filesystem::exists(dir / "other.bin"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);  // no temporary left behind
}

TEST(ReadSmallFile, RefusesLargeFiles) {
  TempDir dir;
  testing::write_text(dir / "f", std::string(100, 'x'));
  EXPECT_EQ(read_small_file(dir / "f").size(), 100u);
  EXPECT_THROW(read_small_file(dir / "f", 10), IoError);
  EXPECT_THROW(read_small_file(dir / "missing"), IoError);
}

std::string sha_hex(std::string_view s) {
  Sha256 h;
  h.update(s);
  return Sha256::hex(h.finish());
}

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(chunk);
  EXPECT_EQ(Sha256::hex(million.finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Both block functions on random blocks from random states (the SHA-extension one only where the
// CPU has it; the digests above then ran through it).
TEST(Sha256, ExtensionBlocksEqualPortableBlocks) {
  if (!cpu_has_sha_extensions()) GTEST_SKIP() << "this CPU has no SHA extensions";
  EXPECT_TRUE(Sha256::hardware_accelerated());
  std::mt19937 rng(7);
  for (size_t count : {1, 2, 3, 17}) {
    std::vector<uint8_t> blocks(64 * count);
    for (uint8_t& b : blocks) b = static_cast<uint8_t>(rng());
    std::array<uint32_t, 8> a{}, b{};
    for (uint32_t& v : a) v = static_cast<uint32_t>(rng());
    b = a;
    compress_blocks_portable(a.data(), blocks.data(), count);
    compress_blocks_shani(b.data(), blocks.data(), count);
    EXPECT_EQ(a, b) << count << " blocks";
  }
}

TEST(Sha256, SplitUpdatesEqualOneUpdate) {
  const std::string text(200, 'q');
  Sha256 a;
  for (char c : text) a.update(std::string_view(&c, 1));
  EXPECT_EQ(Sha256::hex(a.finish()), sha_hex(text));
}

}  // namespace
}  // namespace flashdesk
