// KV block files: header round trip and detection of every kind of damage, naming the field.
#include <gtest/gtest.h>

#include "storage/kv_block_file.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

BlockHeader sample_header(std::span<const uint8_t> payload) {
  BlockHeader h;
  h.key = xxh3_128(as_bytes("key"));
  h.parent = xxh3_128(as_bytes("parent"));
  h.token_count = 256;
  h.model_fingerprint = "flash-tiny@0123abcd";
  h.payload_size = payload.size();
  h.payload_checksum = xxh3_64(payload);
  return h;
}

std::vector<uint8_t> sample_file() {
  const auto payload = testing::pattern_bytes(3, 5000);
  auto file = encode_block_header(sample_header(payload));
  file.insert(file.end(), payload.begin(), payload.end());
  return file;
}

void expect_rejected(const std::vector<uint8_t>& file, const std::string& needle) {
  try {
    verify_block_file(file, xxh3_128(as_bytes("key")), "flash-tiny@0123abcd", "b.kvb");
    FAIL() << "accepted a block file with: " << needle;
  } catch (const FormatError& e) {
    EXPECT_EQ(e.file(), "b.kvb");
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void store_u32(std::vector<uint8_t>& f, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) f[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

void reseal_header(std::vector<uint8_t>& f) {  // recompute the header checksum after an edit
  const uint64_t c = xxh3_64(std::span(f).first(248));
  for (int i = 0; i < 8; ++i) f[248 + i] = static_cast<uint8_t>(c >> (8 * i));
}

TEST(BlockFile, HeaderRoundTrips) {
  const auto payload = testing::pattern_bytes(1, 100);
  const BlockHeader h = sample_header(payload);
  const auto bytes = encode_block_header(h);
  ASSERT_EQ(bytes.size(), kBlockHeaderSize);
  const BlockHeader back = parse_block_header(bytes, "x");
  EXPECT_EQ(back.key, h.key);
  EXPECT_EQ(back.parent, h.parent);
  EXPECT_EQ(back.token_count, 256u);
  EXPECT_EQ(back.model_fingerprint, h.model_fingerprint);
  EXPECT_EQ(back.payload_size, 100u);
  EXPECT_EQ(back.payload_checksum, h.payload_checksum);
  BlockHeader first = h;
  first.parent.reset();
  EXPECT_FALSE(parse_block_header(encode_block_header(first), "x").parent);
}

TEST(BlockFile, ValidFileVerifies) {
  const auto file = sample_file();
  const BlockHeader h =
      verify_block_file(file, xxh3_128(as_bytes("key")), "flash-tiny@0123abcd", "b.kvb");
  EXPECT_EQ(h.payload_size, 5000u);
}

TEST(BlockFile, DetectsEachKindOfDamage) {
  auto f = sample_file();
  f[0] = 'X';
  expect_rejected(f, "magic");
  f = sample_file();
  store_u32(f, 8, 2);
  reseal_header(f);
  expect_rejected(f, "format version at offset 8 is 2");
  f = sample_file();
  store_u32(f, 12, 512);
  reseal_header(f);
  expect_rejected(f, "header size");
  f = sample_file();
  store_u32(f, 52, 200);
  reseal_header(f);
  expect_rejected(f, "fingerprint length at offset 52");
  f = sample_file();
  f[80] ^= 1;  // inside the fingerprint: the header checksum catches it
  expect_rejected(f, "header checksum");
  f = sample_file();
  f[kBlockHeaderSize + 1234] ^= 0x10;  // one bit of the payload
  expect_rejected(f, "payload checksum");
  f = sample_file();
  f.resize(f.size() - 1);
  expect_rejected(f, "payload length at offset 56 says 5000 bytes, the file holds 4999");
  f = sample_file();
  f.push_back(0);
  expect_rejected(f, "the file holds 5001");
  f = sample_file();
  f.resize(100);
  expect_rejected(f, "block header truncated: 100 of 256 bytes");
  f.clear();
  expect_rejected(f, "truncated");
}

TEST(BlockFile, DetectsAWrongKeyOrModel) {
  const auto file = sample_file();
  EXPECT_THROW(verify_block_file(file, xxh3_128(as_bytes("other")), "flash-tiny@0123abcd", "b"),
               FormatError);
  EXPECT_THROW(verify_block_file(file, xxh3_128(as_bytes("key")), "flash-tiny@ffff", "b"),
               FormatError);
}

TEST(BlockFile, PathsSpellTheKey) {
  const BlockKey k = *BlockKey::from_hex("00112233445566778899aabbccddeeff");
  EXPECT_EQ(block_file_path("/kv", k), "/kv/00/00112233445566778899aabbccddeeff.kvb");
  EXPECT_EQ(key_from_block_file_name(block_file_path("/kv", k)), k);
  EXPECT_FALSE(key_from_block_file_name("/kv/00/00112233445566778899aabbccddeeff.kvb.tmp-1-2"));
  EXPECT_FALSE(key_from_block_file_name("/kv/00/nothex.kvb"));
}

}  // namespace
}  // namespace flashdesk::storage
