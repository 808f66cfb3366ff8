// Block keys: the documented byte layout (rebuilt by hand here), chaining, and what changes a key.
#include <gtest/gtest.h>

#include "storage/kv_block_key.h"

namespace flashdesk::storage {
namespace {

// The layout of docs/kv-block-store.md, written out independently of kv_block_key.cpp.
struct Bytes {
  std::vector<uint8_t> v;
  void str(std::string_view s) { v.insert(v.end(), s.begin(), s.end()); }
  void u32(uint32_t x) {
    for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
  }
  void i64(int64_t x) {
    for (int i = 0; i < 8; ++i)
      v.push_back(static_cast<uint8_t>(static_cast<uint64_t>(x) >> (8 * i)));
  }
  template <size_t N>
  void key(const Digest<N>& d) {
    v.insert(v.end(), d.bytes.begin(), d.bytes.end());
  }
};

TEST(BlockKey, MatchesTheDocumentedLayoutWithoutParentOrImages) {
  Bytes b;
  b.str("fdkv-key-v2");
  b.u32(2);
  b.str("fp");
  b.key(Digest128{});  // no parent: 16 zero bytes
  b.u32(4);
  for (TokenId t : {1, 2, 3, 70000}) b.u32(static_cast<uint32_t>(t));
  b.u32(0);
  const std::vector<TokenId> tokens{1, 2, 3, 70000};
  EXPECT_EQ(block_key("fp", std::nullopt, tokens, {}, 0), xxh3_128(b.v));
}

TEST(BlockKey, MatchesTheDocumentedLayoutWithParentAndImages) {
  const BlockKey parent = xxh3_128(as_bytes("parent"));
  const ImageDigest img1 = image_digest(as_bytes("image one")),
                    img2 = image_digest(as_bytes("image 2"));
  // Block [8, 12) of the prompt; image 2 starts before it, image 1 inside; image 3 lies outside.
  const std::vector<ImageSpan> images{{img1, 10, 5}, {img2, 5, 4}, {img1, 12, 3}};
  Bytes b;
  b.str("fdkv-key-v2");
  b.u32(7);
  b.str("model-X");
  b.key(parent);
  b.u32(4);
  for (TokenId t : {9, 9, 9, 9}) b.u32(static_cast<uint32_t>(t));
  b.u32(2);
  b.i64(-3);  // image 2 begins 3 tokens before the block
  b.i64(4);
  b.key(img2);
  b.i64(2);
  b.i64(5);
  b.key(img1);
  const std::vector<TokenId> tokens{9, 9, 9, 9};
  EXPECT_EQ(block_key("model-X", parent, tokens, images, 8), xxh3_128(b.v));
}

// The worked example of docs/kv-block-store.md; a change here means every stored block is lost.
TEST(BlockKey, DocumentedExampleIsStable) {
  std::vector<TokenId> prompt(512);
  for (int i = 0; i < 512; ++i) prompt[i] = i;
  const auto keys = chain_block_keys("example-model", prompt, {}, 256);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].hex(), "4597fab9b7a69bdf7b8bca8f32cd77e8");
  EXPECT_EQ(keys[1].hex(), "5080fe5481ebe82e1415c3089a72dfd7");
}

TEST(BlockKey, ChainsEachFullBlockToItsParent) {
  std::vector<TokenId> prompt(37);
  for (int i = 0; i < 37; ++i) prompt[i] = i * 3;
  const auto keys = chain_block_keys("m", prompt, {}, 16);
  ASSERT_EQ(keys.size(), 2u);  // the partial tail (5 tokens) has no block
  const std::span<const TokenId> p(prompt);
  EXPECT_EQ(keys[0], block_key("m", std::nullopt, p.subspan(0, 16), {}, 0));
  EXPECT_EQ(keys[1], block_key("m", keys[0], p.subspan(16, 16), {}, 16));
}

TEST(BlockKey, EqualPrefixesShareKeysAndADifferenceChangesAllLaterKeys) {
  std::vector<TokenId> a(64), b;
  for (int i = 0; i < 64; ++i) a[i] = i;
  b = a;
  b[40] = 999;  // in block 2 of 4
  const auto ka = chain_block_keys("m", a, {}, 16), kb = chain_block_keys("m", b, {}, 16);
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_EQ(ka[1], kb[1]);
  EXPECT_NE(ka[2], kb[2]);
  EXPECT_NE(ka[3], kb[3]);  // same tokens, different parent
}

TEST(BlockKey, AnotherModelFingerprintChangesEveryKey) {
  std::vector<TokenId> prompt(32, 5);
  const auto a = chain_block_keys("model-A", prompt, {}, 16);
  const auto b = chain_block_keys("model-B", prompt, {}, 16);
  EXPECT_NE(a[0], b[0]);
  EXPECT_NE(a[1], b[1]);
}

TEST(BlockKey, ImagesChangeOnlyTheBlocksTheyOverlap) {
  std::vector<TokenId> prompt(48, 7);  // placeholder tokens look alike: only the digest differs
  const ImageDigest red = image_digest(as_bytes("red")), blue = image_digest(as_bytes("blue"));
  const std::vector<ImageSpan> with_red{{red, 12, 8}};  // tokens 12..19: blocks 0 and 1
  const std::vector<ImageSpan> with_blue{{blue, 12, 8}};
  const auto r = chain_block_keys("m", prompt, with_red, 16);
  const auto b = chain_block_keys("m", prompt, with_blue, 16);
  const auto none = chain_block_keys("m", prompt, {}, 16);
  EXPECT_NE(r[0], b[0]);
  EXPECT_NE(r[0], none[0]);
  EXPECT_NE(r[1], b[1]);
  // Block 2 holds no image tokens but chains block 1: still different.
  EXPECT_NE(r[2], b[2]);
  // An image outside the prompt's blocks changes nothing.
  const std::vector<ImageSpan> far{{red, 100, 8}};
  EXPECT_EQ(chain_block_keys("m", prompt, far, 16), none);
}

TEST(BlockKey, PrefixDigestCoversTheTailAndDiffersFromBlockKeys) {
  std::vector<TokenId> prompt(40);
  for (int i = 0; i < 40; ++i) prompt[i] = i;
  const std::span<const TokenId> p(prompt);
  const Digest128 d40 = prefix_digest("m", p, {}, 16);
  EXPECT_EQ(d40, prefix_digest("m", p, {}, 16));
  EXPECT_NE(d40, prefix_digest("m", p.first(39), {}, 16));
  EXPECT_NE(d40, prefix_digest("n", p, {}, 16));
  const auto keys = chain_block_keys("m", p.first(32), {}, 16);
  EXPECT_NE(prefix_digest("m", p.first(32), {}, 16), keys[1]);  // the empty tail chains key 1
  std::vector<TokenId> edited = prompt;
  edited[3] = 1000;
  EXPECT_NE(d40, prefix_digest("m", edited, {}, 16));
}

}  // namespace
}  // namespace flashdesk::storage
