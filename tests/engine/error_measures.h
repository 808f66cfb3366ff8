// The measures the engine tests compare two runs of numbers with, defined once: largest absolute
// value and difference, the relative error max|a - b| / max|b|, and the cosine similarity.
#pragma once

#include <span>

namespace flashdesk::test {

double max_abs(std::span<const float> v);
// max |a_i - b_i|; a and b must be equally long (a gtest failure otherwise).
double max_abs_diff(std::span<const float> a, std::span<const float> b);
// max |a_i - b_i| / max |b_i|.
double relative_error(std::span<const float> a, std::span<const float> b);
// a·b / (|a| |b|), in double.
double cosine(std::span<const float> a, std::span<const float> b);

}  // namespace flashdesk::test
