// Token-id list files: both spellings, and malformed lists as FormatErrors naming the file.
#include <gtest/gtest.h>

#include "engine/util/error.h"
#include "engine/util/token_ids_file.h"

namespace flashdesk {
namespace {

TEST(TokenIdsFile, ParsesJsonArraysAndWhitespaceLists) {
  EXPECT_EQ(parse_token_ids(" [1, 2,\n3] ", "f"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_token_ids("4\t5\n6 \r\n", "f"), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(parse_token_ids("-1 7", "f"), (std::vector<int32_t>{-1, 7}));  // range checked later
  EXPECT_TRUE(parse_token_ids("  \n", "f").empty());
  EXPECT_TRUE(parse_token_ids("[]", "f").empty());
}

TEST(TokenIdsFile, MalformedListsNameTheFile) {
  for (const char* bad : {"[1, 2", "[1, \"a\"]", "[[1]]", "1 two 3", "1.5", "[1.5]", "99999999999",
                          "{\"a\": 1}", "1,2"}) {
    try {
      parse_token_ids(bad, "ids.txt");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("ids.txt"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_token_ids("/nonexistent/ids.txt"), IoError);
}

}  // namespace
}  // namespace flashdesk
