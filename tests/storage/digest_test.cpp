// Digests (XXH3, fixed seed) and base64: known-answer vectors from their specifications.
#include <gtest/gtest.h>

#include "storage/base64.h"
#include "storage/digest.h"

namespace flashdesk::storage {
namespace {

// The published XXH3 sanity values for the empty input (xxHash's own test suite, seed 0): if a
// library update changed them, every stored key would silently stop matching.
TEST(Digest, Xxh3KnownAnswersForEmptyInput) {
  EXPECT_EQ(xxh3_64({}), 0x2D06800538D394C2ull);
  EXPECT_EQ(xxh3_128({}).hex(), "99aa06d3014798d86001c324468d497f");
}

TEST(Digest, HexRoundTripAndRejectsMalformed) {
  const Digest128 d = xxh3_128(as_bytes("FlashDesk"));
  EXPECT_EQ(Digest128::from_hex(d.hex()), d);
  EXPECT_EQ(Digest128::from_hex("ABCDEF0123456789abcdef0123456789")->hex(),
            "abcdef0123456789abcdef0123456789");
  EXPECT_FALSE(Digest128::from_hex("abc"));
  EXPECT_FALSE(Digest128::from_hex("zz000000000000000000000000000000"));
  EXPECT_TRUE(Digest128{}.is_zero());
  EXPECT_FALSE(d.is_zero());
}

TEST(Digest, DiffersForDifferentInput) {
  EXPECT_NE(xxh3_128(as_bytes("a")), xxh3_128(as_bytes("b")));
  EXPECT_NE(xxh3_64(as_bytes("a")), xxh3_64(as_bytes("b")));
}

// RFC 4648 section 10 test vectors.
TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(as_bytes(plain)), encoded);
    const auto decoded = base64_decode(encoded);
    ASSERT_TRUE(decoded) << encoded;
    EXPECT_EQ(std::string(decoded->begin(), decoded->end()), plain);
  }
}

TEST(Base64, RoundTripsEveryByte) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(base64_decode(base64_encode(all)), all);
}

TEST(Base64, RejectsMalformedInput) {
  for (const char* bad :
       {"Zg=", "Zg", "Z===", "Zm9v!A==", "Zg==Zg==", "=Zg=", "Zh==", "Zm9=", "Zm 9v"})
    EXPECT_FALSE(base64_decode(bad)) << bad;
}

}  // namespace
}  // namespace flashdesk::storage
