// Error measures of the engine tests (error_measures.h).
#include "tests/engine/error_measures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace flashdesk::test {

double max_abs(std::span<const float> v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

double relative_error(std::span<const float> a, std::span<const float> b) {
  return max_abs_diff(a, b) / max_abs(b);
}

double cosine(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

}  // namespace flashdesk::test
