// The --remote client's event stream reader: data payloads across arbitrary byte splits.
#include "app/remote/sse_reader.h"

#include <gtest/gtest.h>

namespace flashdesk::remote {
namespace {

TEST(SseReader, GivesDataPayloadsWhateverTheSplit) {
  const std::string stream =
      "data: {\"a\":1}\n\n: a comment\nevent: x\ndata:{\"b\":2}\r\n\r\ndata: [DONE]\n\n";
  for (size_t step = 1; step <= stream.size(); ++step) {
    SseReader reader;
    std::vector<std::string> data;
    for (size_t at = 0; at < stream.size(); at += step)
      for (std::string& d : reader.feed(std::string_view(stream).substr(at, step)))
        data.push_back(std::move(d));
    EXPECT_EQ(data, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "[DONE]"})) << step;
  }
}

TEST(SseReader, HoldsAnUnfinishedLine) {
  SseReader reader;
  EXPECT_TRUE(reader.feed("data: {\"a\"").empty());
  EXPECT_EQ(reader.feed(":1}\n"), std::vector<std::string>{"{\"a\":1}"});
}

}  // namespace
}  // namespace flashdesk::remote
