// An indexer score row's tie at its k-th best: how many values equal it and how many of those
// the top k take. Only where some are left out (taken < equal) does the selection run torch's
// steps to choose them; a tie the top k takes whole is an ordered compaction. Read back by the
// benchmarks, outside their timings.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace flashdesk::bench {

struct KthTie {
  int64_t equal = 0;  // values equal to the k-th best (0: an empty row)
  int64_t taken = 0;  // of them, in the top k
  std::string str() const { return std::to_string(equal) + " (" + std::to_string(taken) + ")"; }
};

inline KthTie kth_tie(std::vector<float> row, int64_t k) {
  if (k <= 0 || row.empty()) return {};
  k = std::min<int64_t>(k, static_cast<int64_t>(row.size()));
  std::nth_element(row.begin(), row.begin() + (k - 1), row.end(), std::greater<>());
  const float kth = row[static_cast<size_t>(k - 1)];
  const auto above = std::count_if(row.begin(), row.end(), [&](float v) { return v > kth; });
  return {std::count(row.begin(), row.end(), kth), k - above};
}

// A score row as raw little-endian float32 (the benchmarks' --dump-scores), for the host's torch
// selection, its folder made where missing (a thirty-ninth session's call lost its rows to a
// --dump-scores folder not made first); false (and a message) where it could not be written.
inline bool write_score_row(const std::string& path, const std::vector<float>& row) {
  std::error_code ec;  // (a folder that cannot be made fails the open below, which says so)
  if (const auto dir = std::filesystem::path(path).parent_path(); !dir.empty())
    std::filesystem::create_directories(dir, ec);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f && std::fwrite(row.data(), sizeof(float), row.size(), f) == row.size();
  if (f) ok = std::fclose(f) == 0 && ok;
  if (!ok) std::fprintf(stderr, "could not write the score row %s\n", path.c_str());
  return ok;
}

}  // namespace flashdesk::bench
