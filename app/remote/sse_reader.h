// Splits a server-sent event stream, as its bytes arrive, into the payloads of its `data:` lines
// (the only field the chat completion API uses; comments and other fields are skipped).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashdesk::remote {

class SseReader {
 public:
  // Takes the next bytes; returns the data payloads of the lines they complete.
  std::vector<std::string> feed(std::string_view bytes) {
    std::vector<std::string> data;
    pending_.append(bytes);
    size_t start = 0, end;
    while ((end = pending_.find('\n', start)) != std::string::npos) {
      std::string_view line(pending_.data() + start, end - start);
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (line.starts_with("data:")) {
        line.remove_prefix(5);
        if (line.starts_with(' ')) line.remove_prefix(1);
        data.emplace_back(line);
      }
      start = end + 1;
    }
    pending_.erase(0, start);
    return data;
  }

 private:
  std::string pending_;
};

}  // namespace flashdesk::remote
