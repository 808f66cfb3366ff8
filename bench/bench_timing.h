// Timing helpers every benchmark shares: a steady clock, elapsed seconds and the median of runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace flashdesk::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The upper median (the middle element, or the higher of the two middle ones).
inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace flashdesk::bench
