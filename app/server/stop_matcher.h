// Stop sequences over streamed answer text: the engine stops on EOS only, so the server watches
// the text for the request's `stop` strings, holds back what could be the start of one, and cuts
// the answer before the first that appears (the stop string itself is not returned, as OpenAI).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashdesk::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Takes the next piece of text; returns what may be passed on now. After a stop sequence is
  // seen, stopped() is true and nothing more is passed on.
  std::string feed(std::string_view text);
  // The text held back at the end of generation (no stop sequence completed).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  // Length of the longest tail of pending_ that begins some stop sequence.
  size_t held_tail() const;

  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace flashdesk::server
