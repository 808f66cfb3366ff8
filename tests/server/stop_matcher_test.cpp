// Stop sequences across streamed pieces: cut before the first, held text released at the end.
#include "app/server/stop_matcher.h"

#include <gtest/gtest.h>

namespace flashdesk::server {
namespace {

std::string feed_all(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += m.feed(p);
  return out + m.flush();
}

TEST(StopMatcher, CutsBeforeAStopSplitAcrossPieces) {
  StopMatcher m({"END"});
  EXPECT_EQ(feed_all(m, {"abc E", "N", "D more"}), "abc ");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.feed("later"), "");
}

TEST(StopMatcher, HoldsOnlyWhatCouldStartAStop) {
  StopMatcher m({"END", "\n\n"});
  EXPECT_EQ(m.feed("abc"), "abc");
  EXPECT_EQ(m.feed("xE"), "x");
  EXPECT_EQ(m.feed("Nx"), "ENx");
  EXPECT_EQ(m.feed("\n"), "");
  EXPECT_EQ(m.flush(), "\n");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, TheEarliestOfSeveralWins) {
  StopMatcher m({"cd", "b"});
  EXPECT_EQ(feed_all(m, {"abcd"}), "a");
  StopMatcher none({});
  EXPECT_EQ(feed_all(none, {"a", "b"}), "ab");
}

}  // namespace
}  // namespace flashdesk::server
