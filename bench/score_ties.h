// How many of an indexer score row's values equal its k-th best: the tie the selection resolves
// with torch's steps (1: no tie across the k-th; 0: an empty row). Read back by the benchmarks,
// outside their timings.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace flashdesk::bench {

inline int64_t equal_to_kth(std::vector<float> row, int64_t k) {
  if (k <= 0 || row.empty()) return 0;
  k = std::min<int64_t>(k, static_cast<int64_t>(row.size()));
  std::nth_element(row.begin(), row.begin() + (k - 1), row.end(), std::greater<>());
  const float kth = row[static_cast<size_t>(k - 1)];
  return std::count(row.begin(), row.end(), kth);
}

// A score row as raw little-endian float32 (the benchmarks' --dump-scores), for the host's torch
// selection; false (and a message) where it could not be written.
inline bool write_score_row(const std::string& path, const std::vector<float>& row) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f && std::fwrite(row.data(), sizeof(float), row.size(), f) == row.size();
  if (f) ok = std::fclose(f) == 0 && ok;
  if (!ok) std::fprintf(stderr, "could not write the score row %s\n", path.c_str());
  return ok;
}

}  // namespace flashdesk::bench
