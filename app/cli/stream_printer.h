// Prints a streamed answer to a terminal or a pipe: the reasoning first (dimmed on a terminal,
// marked on a pipe), then the answer.
#pragma once

#include <cstdio>
#include <string_view>

#include "engine/runtime/generator.h"

namespace flashdesk::cli {

class StreamPrinter {
 public:
  StreamPrinter(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {}

  StreamCallbacks callbacks();
  // Ends the answer's line.
  void finish();

 private:
  void print(StreamChannel channel, std::string_view text);

  std::FILE* out_;
  bool terminal_;
  bool in_thinking_ = false;
  bool printed_ = false;
};

}  // namespace flashdesk::cli
