// McIlroy's adversary for quicksort-based selection, shared by the host and device tests of
// torch's selection (tests/engine/torch_topk_test.cpp, tests/cuda/torch_select_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace flashdesk::test {

// McIlroy's "killer adversary" for quicksort: runs `algorithm` (over indices, with a comparator)
// while fixing each element's value only when a comparison needs it, so that every pivot is a bad
// one; the values it fixed, negated (torch's order is larger-first) and halved into pairs of ties.
template <class Algorithm>
inline std::vector<float> adversarial_row(int64_t n, Algorithm algorithm) {
  const int64_t gas = n;  // not fixed yet: above every fixed value
  std::vector<int64_t> val(static_cast<size_t>(n), gas), idx(static_cast<size_t>(n));
  int64_t fixed = 0, candidate = -1;
  auto fix = [&](int64_t x) { val[static_cast<size_t>(x)] = fixed++; };
  auto less = [&](int64_t x, int64_t y) {
    auto vx = [&] { return val[static_cast<size_t>(x)]; };
    auto vy = [&] { return val[static_cast<size_t>(y)]; };
    if (vx() == gas && vy() == gas) fix(x == candidate ? x : y);
    if (vx() == gas)
      candidate = x;
    else if (vy() == gas)
      candidate = y;
    return vx() < vy();
  };
  for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = i;
  algorithm(idx, less);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (val[static_cast<size_t>(i)] == gas) fix(i);
    v[static_cast<size_t>(i)] = -static_cast<float>(val[static_cast<size_t>(i)] / 2);
  }
  return v;
}

}  // namespace flashdesk::test
