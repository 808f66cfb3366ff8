// Finds stop sequences in streamed text (stop_matcher.h).
#include "app/server/stop_matcher.h"

#include <algorithm>

namespace flashdesk::server {

std::string StopMatcher::feed(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  const size_t keep = held_tail();
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = stopped_ ? std::string() : std::move(pending_);
  pending_.clear();
  return out;
}

size_t StopMatcher::held_tail() const {
  size_t longest = 0;
  for (const std::string& s : stops_)
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > longest; --n)
      if (std::string_view(pending_).substr(pending_.size() - n) ==
          std::string_view(s).substr(0, n)) {
        longest = n;
        break;
      }
  return longest;
}

}  // namespace flashdesk::server
