// The API key: the bearer check and which hosts count as loopback.
#include "app/server/api_key.h"

#include <gtest/gtest.h>

#include <fstream>

#include "engine/util/error.h"

namespace flashdesk::server {
namespace {

TEST(ApiKey, BearerMatchesOnlyTheWholeKey) {
  EXPECT_TRUE(bearer_matches("Bearer sesame", "sesame"));
  EXPECT_FALSE(bearer_matches("Bearer sesam", "sesame"));
  EXPECT_FALSE(bearer_matches("Bearer sesamee", "sesame"));
  EXPECT_FALSE(bearer_matches("Bearer Sesame", "sesame"));
  EXPECT_FALSE(bearer_matches("sesame", "sesame"));
  EXPECT_FALSE(bearer_matches("Basic sesame", "sesame"));
  EXPECT_FALSE(bearer_matches("", "sesame"));
  EXPECT_FALSE(bearer_matches("Bearer ", ""));
}

TEST(ApiKey, LoopbackHosts) {
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_TRUE(is_loopback("127.1.2.3"));
  EXPECT_TRUE(is_loopback("::1"));
  EXPECT_TRUE(is_loopback("localhost"));
  EXPECT_FALSE(is_loopback("0.0.0.0"));
  EXPECT_FALSE(is_loopback("192.168.1.5"));
  EXPECT_FALSE(is_loopback("::"));
}

TEST(ApiKey, FileGivesItsFirstLineTrimmed) {
  const auto path = std::filesystem::temp_directory_path() / "flashdesk-api-key-test";
  std::ofstream(path) << "s3cret  \nignored\n";
  EXPECT_EQ(read_api_key_file(path), "s3cret");
  std::ofstream(path) << "\n";
  EXPECT_THROW(read_api_key_file(path), InvalidRequest);
  std::filesystem::remove(path);
  EXPECT_THROW(read_api_key_file(path), IoError);
}

}  // namespace
}  // namespace flashdesk::server
