// Engram hash ids against values worked out by hand from docs/model-spec.md §7 on a tiny table:
// max n-gram 3, 2 heads, multipliers [3, 5, 7], primes [11, 13, 17, 19] (offsets 0, 11, 24, 41).
#include <gtest/gtest.h>

#include <vector>

#include "engine/model/engram_hash.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

TextConfig tiny() {
  TextConfig t;
  t.engram_layer_ids = {1};
  t.engram_max_ngram_size = 3;
  t.engram_n_heads = 2;
  t.engram_compressed_vocab_size = 7;
  t.engram_pad_token_id = 2;
  return t;
}

EngramHashTables tables() {
  // token id -> compressed id: id % 7 (so pad id 2 -> 2).
  EngramHashTables tb;
  for (int64_t i = 0; i < 12; ++i) tb.token_map.push_back(i % 7);
  tb.multipliers = {{3, 5, 7}};
  tb.primes = {{11, 13, 17, 19}};
  return tb;
}

TEST(EngramHash, MixesShiftedIdsWithRollingXorAndPadsBeforeTheStart) {
  const EngramHasher h(tiny(), tables(), "test");
  ASSERT_EQ(h.columns(), 4);
  const std::vector<int32_t> tokens = {4, 9, 11};  // compressed 4, 2, 4
  const std::vector<int64_t> pos = {0, 2};
  std::vector<int64_t> out(8);
  h.hash(0, tokens, {}, pos, out.data());
  // Position 0: c = [4, pad 2, pad 2]. 2-gram 4*3 ^ 2*5 = 12 ^ 10 = 6; 3-gram 6 ^ 2*7 = 6 ^ 14 = 8.
  EXPECT_EQ(out[0], 6 % 11 + 0);
  EXPECT_EQ(out[1], 6 % 13 + 11);
  EXPECT_EQ(out[2], 8 % 17 + 24);
  EXPECT_EQ(out[3], 8 % 19 + 41);
  // Position 2: c = [4, 2, 4]. 2-gram 12 ^ 10 = 6; 3-gram 6 ^ 28 = 26.
  EXPECT_EQ(out[4], 6);
  EXPECT_EQ(out[5], 6 + 11);
  EXPECT_EQ(out[6], 26 % 17 + 24);
  EXPECT_EQ(out[7], 26 % 19 + 41);
}

TEST(EngramHash, DeadTokenCutsTheLookBack) {
  const EngramHasher h(tiny(), tables(), "test");
  const std::vector<int32_t> tokens = {5, 3, 4};
  const std::vector<uint8_t> dead = {1, 0, 0};  // token 0 is an image token
  const std::vector<int64_t> pos = {2};
  std::vector<int64_t> out(4);
  h.hash(0, tokens, dead, pos, out.data());
  // c = [4, 3, pad 2]: 2-gram 12 ^ 15 = 3; 3-gram 3 ^ 14 = 13.
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[2], 13 + 24);
}

TEST(EngramHash, BadTablesAreFormatErrors) {
  EngramHashTables tb = tables();
  tb.multipliers = {{3, 5}};
  EXPECT_THROW(EngramHasher(tiny(), tb, "map"), FormatError);
  tb = tables();
  tb.token_map[3] = 7;  // outside the compressed vocabulary
  EXPECT_THROW(EngramHasher(tiny(), tb, "map"), FormatError);
  tb = tables();
  tb.multipliers = {{3, -5, 7}};
  EXPECT_THROW(EngramHasher(tiny(), tb, "map"), FormatError);
  const EngramHasher h(tiny(), tables(), "test");
  const std::vector<int32_t> tokens = {40};
  const std::vector<int64_t> pos = {0};
  std::vector<int64_t> out(4);
  EXPECT_THROW(h.hash(0, tokens, {}, pos, out.data()), InvalidRequest);
}

}  // namespace
}  // namespace flashdesk
